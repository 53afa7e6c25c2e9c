package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
)

// Durable syncs the write-ahead log, once for the callers that wait
// together: every caller returns after a sync that started after it
// arrived, and many concurrent callers share few syncs. A store with no
// log yet has nothing to sync; a closed one says so.
func TestDurableSyncsTheLogOnceForManyCallers(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "engram.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Durable(ctx); err != nil {
		t.Fatalf("Durable of a fresh store: %v", err)
	}
	const callers = 64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Upsert(ctx, memory.Node{ProjectID: "p", Subkind: memory.Decision, Label: fmt.Sprintf("decision %d kept on disk", i)}); err != nil {
				errs <- err
				return
			}
			before := s.wal.started.Load()
			if err := s.Durable(ctx); err != nil {
				errs <- err
				return
			}
			if done := s.wal.completed.Load(); done <= before {
				errs <- fmt.Errorf("Durable returned with syncs up to %d completed, none started after it arrived (%d started)", done, before)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := s.wal.started.Load()
	if n == 0 || n > callers {
		t.Fatalf("%d syncs for %d callers", n, callers)
	}
	t.Logf("%d callers, %d syncs of the log", callers, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Durable(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Durable after Close = %v, want ErrClosed", err)
	}
}
