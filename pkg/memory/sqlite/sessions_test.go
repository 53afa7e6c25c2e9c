package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// TestBriefOnceAcrossOpens: a flag taken before the store was closed is
// still taken after it is opened again (the memo starts empty; the table
// answers), and the reopened store then answers from its memo.
func TestBriefOnceAcrossOpens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	ref := memory.SessionRef{Project: "p", Session: "s"}
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.BriefOnce(ctx, ref, time.Hour); err != nil || !ok {
		t.Fatalf("first briefing: %v %v", ok, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 2 {
		if ok, err := s.BriefOnce(ctx, ref, time.Hour); err != nil || ok {
			t.Fatalf("briefing %d after reopening: %v %v", i, ok, err)
		}
	}
	if !s.briefs.Taken(ref, time.Now().UnixNano()) {
		t.Fatal("the flag read from the table was not remembered")
	}
}
