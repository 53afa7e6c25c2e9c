package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
)

// Acknowledged writes and the machine's loss.
//
// The database runs with synchronous=NORMAL: a commit writes its frames to
// the write-ahead log without waiting for the disk, and the log is synced
// at checkpoints. That survives the process being killed (the frames are
// in the operating system's cache), not the machine: a power loss or a
// kernel crash takes the commits since the last sync with it. A worker
// that acknowledged its event after such a commit had dropped it. Durable
// syncs the log before an acknowledgement: one fsync covers every commit
// before it, and callers that arrive while one runs share the next (a
// busy injector pays one fsync for many turns). A checkpoint syncs the
// database file itself when it completes, so the frames it moved there
// are on disk already.

// walSync is Durable's state: the log file, opened on first use, and the
// syncs started and completed (a caller whose commits came before a sync
// that started after it arrived needs no sync of its own).
type walSync struct {
	mu        sync.Mutex // held while syncing
	f         *os.File
	started   atomic.Uint64 // syncs started
	completed atomic.Uint64 // the number (started) of the last sync that succeeded; set under mu
	// failed is the first sync's error, returned by every later call: after
	// a write-back error Linux marks the pages clean and reports the error
	// once, so a later sync would succeed without the commits on disk.
	failed error
	hook   func() // tests: called after a sync is counted, before it runs
}

// Durable returns once every commit made so far is on disk: it syncs the
// write-ahead log (see above). A store whose file has no log (nothing
// written since it was created, or every connection closed: the log was
// checkpointed into the synced database and removed) has nothing to sync.
// Once a sync failed, it fails for good: the store must be reopened.
func (s *Store) Durable(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &s.wal
	arrived := w.started.Load()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return w.failed
	}
	if w.completed.Load() > arrived {
		return nil // a sync that started after this caller's commits is done
	}
	if s.closed.Load() {
		return ErrClosed // Close closed the log file (closeWAL): not opened again
	}
	ok, err := w.open(s.path + "-wal")
	if err != nil || !ok {
		return err
	}
	n := w.started.Add(1)
	if w.hook != nil {
		w.hook()
	}
	if err := w.f.Sync(); err != nil {
		w.failed = fmt.Errorf("sqlite: durable: sync the write-ahead log (reopen the store: a failed sync is not retried): %w", err)
		return w.failed
	}
	w.completed.Store(n)
	return nil
}

// open makes w.f the log file at path (reopened when SQLite removed it and
// made another since); ok false: there is none.
func (w *walSync) open(path string) (ok bool, err error) {
	cur, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		w.close()
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sqlite: durable: %w", err)
	}
	if w.f != nil {
		if held, err := w.f.Stat(); err == nil && os.SameFile(held, cur) {
			return true, nil
		}
		w.close()
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sqlite: durable: %w", err)
	}
	w.f = f
	return true, nil
}

func (w *walSync) close() {
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
}

// closeWAL closes the log file Durable opened (Close).
func (s *Store) closeWAL() {
	s.wal.mu.Lock()
	defer s.wal.mu.Unlock()
	s.wal.close()
}
