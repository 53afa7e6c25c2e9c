package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// TestWritesPrepareTheirStatements: a write's statements run unprepared
// the first time and are prepared after the transaction (outside the write
// lock), so the next write runs them prepared; both writes land.
func TestWritesPrepareTheirStatements(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cached := func() int {
		n := 0
		s.stmts.Range(func(_, _ any) bool { n++; return true })
		return n
	}
	ref := memory.SessionRef{Project: "p", Session: "s"}
	before := cached()
	if err := s.PutInjection(ctx, ref, "t1", memory.Injection{IDs: []string{"a"}}, time.Hour); err != nil {
		t.Fatal(err)
	}
	after := cached()
	// Two statements: the sweep of expired records and the insert.
	if after != before+2 {
		t.Fatalf("statements cached: %d before the write, %d after; want two more", before, after)
	}
	if err := s.PutInjection(ctx, ref, "t2", memory.Injection{IDs: []string{"b"}}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if cached() != after {
		t.Fatalf("the second write prepared again: %d statements", cached())
	}
	for turn, want := range map[string]string{"t1": "a", "t2": "b"} {
		in, err := s.TakeInjection(ctx, ref, turn)
		if ids := in.IDs; err != nil || len(ids) != 1 || ids[0] != want {
			t.Fatalf("turn %s: %v %v", turn, in, err)
		}
	}
}
