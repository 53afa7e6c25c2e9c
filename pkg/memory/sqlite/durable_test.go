package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

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
	t.Logf("%d callers with their writes, %d syncs of the log", callers, s.wal.started.Load())

	// Callers that arrive while a sync runs share the next one: hold the
	// first sync until the others wait for it.
	inside, release := make(chan struct{}), make(chan struct{})
	first := true
	s.wal.hook = func() {
		if first {
			first = false
			close(inside)
			<-release
		}
	}
	before := s.wal.started.Load()
	go func() { _ = s.Durable(ctx) }()
	<-inside
	const waiting = 10
	var ready sync.WaitGroup
	for range waiting {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			if err := s.Durable(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	ready.Wait()
	time.Sleep(200 * time.Millisecond) // they reach the lock
	close(release)
	wg.Wait()
	if n := s.wal.started.Load() - before; n > waiting/2 {
		t.Fatalf("%d syncs for a sync and %d callers waiting for it, want about 2", n, waiting)
	}
	s.wal.hook = nil
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Durable(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Durable after Close = %v, want ErrClosed", err)
	}
}

// A failed sync fails every later Durable: after a write-back error the
// kernel reports it once and marks the pages clean, so a later sync that
// succeeds says nothing of the commits before it.
func TestDurableFailsForGoodAfterAFailedSync(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "engram.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Upsert(ctx, memory.Node{ProjectID: "p", Subkind: memory.Decision, Label: "kept on disk"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Durable(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Upsert(ctx, memory.Node{ProjectID: "p", Subkind: memory.Decision, Label: "maybe lost"}); err != nil {
		t.Fatal(err)
	}
	s.wal.hook = func() { _ = s.wal.f.Close() } // its sync fails, as one after a write-back error does
	first := s.Durable(ctx)
	s.wal.hook = nil
	if first == nil {
		t.Fatal("Durable with a failing sync succeeded")
	}
	if err := s.Durable(ctx); err == nil || err.Error() != first.Error() {
		t.Fatalf("the Durable after a failed sync = %v, want the same failure (%v)", err, first)
	}
}
