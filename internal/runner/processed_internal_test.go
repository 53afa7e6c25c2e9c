package runner

import (
	"context"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// records is a Processed of keys alone (no expiry: a test drops a key to
// expire it).
type records map[string]bool

func (m records) EventProcessed(_ context.Context, p memory.ProjectRef, consumer, id string) (bool, error) {
	return m[p.String()+" "+consumer+" "+id], nil
}

func (m records) MarkEventProcessed(_ context.Context, p memory.ProjectRef, consumer, id string, _ time.Duration) error {
	m[p.String()+" "+consumer+" "+id] = true
	return nil
}

// The last run again recorded owed and not done is owed, also when an
// earlier one's record expired first (they are written in order, with one
// time to live). (Found by review: the lookup stopped at the first missing.)
func TestOwedRedoIsTheLastRecorded(t *testing.T) {
	ctx := context.Background()
	p := memory.ProjectRef{Project: "proj"}
	rec := records{}
	r := &Runner{processed: rec, cfg: Config{Consumer: "extractor"}}
	owed := func() int {
		t.Helper()
		k, err := r.owedRedo(ctx, "ev1", p)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	if k := owed(); k != 0 {
		t.Fatalf("owed %d with no records", k)
	}
	for k := 1; k <= 2; k++ {
		if err := r.markRedo(ctx, "ev1", k, p, false); err != nil {
			t.Fatal(err)
		}
	}
	if k := owed(); k != 2 {
		t.Fatalf("owed %d, want 2", k)
	}
	delete(rec, p.String()+" extractor/redo ev1#1") // expired first
	if k := owed(); k != 2 {
		t.Fatalf("owed %d after #1 expired, want 2", k)
	}
	if err := r.markRedo(ctx, "ev1", 2, p, true); err != nil {
		t.Fatal(err)
	}
	if k := owed(); k != 0 {
		t.Fatalf("owed %d once #2 is done, want 0", k)
	}
}
