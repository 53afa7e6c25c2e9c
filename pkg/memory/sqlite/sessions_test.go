package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// TestBriefMemo: the memo answers until the expiry it was given, and a
// growing memo sweeps the expired entries instead of keeping every session.
func TestBriefMemo(t *testing.T) {
	var m briefMemo
	ref := func(i int) memory.SessionRef { return memory.SessionRef{Project: "p", Session: fmt.Sprint("s", i)} }
	m.remember(ref(0), 100, 0)
	if !m.taken(ref(0), 99) || m.taken(ref(0), 100) || m.taken(ref(1), 0) {
		t.Fatal("the memo does not answer by the expiry it was given")
	}
	for i := range 5000 {
		m.remember(ref(i), int64(1000+i), int64(1000+i-1)) // each expires just after it is remembered
	}
	if len(m.until) > 2048 {
		t.Fatalf("the memo kept %d sessions, most of them expired", len(m.until))
	}
	if !m.taken(ref(4999), 5998) {
		t.Fatal("a sweep dropped a session whose flag has not expired")
	}
}

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
	if !s.briefs.taken(ref, time.Now().UnixNano()) {
		t.Fatal("the flag read from the table was not remembered")
	}
}
