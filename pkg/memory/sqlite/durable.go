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
}

// Durable returns once every commit made so far is on disk: it syncs the
// write-ahead log (see above). A store whose file has no log yet (nothing
// written since it was created) has nothing to sync.
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
	if w.completed.Load() > arrived {
		return nil // a sync that started after this caller's commits is done
	}
	if s.closed.Load() {
		return ErrClosed // Close closed the log file (closeWAL): not opened again
	}
	if w.f == nil {
		f, err := os.OpenFile(s.path+"-wal", os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("sqlite: durable: %w", err)
		}
		w.f = f
	}
	n := w.started.Add(1)
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("sqlite: durable: sync the write-ahead log: %w", err)
	}
	w.completed.Store(n)
	return nil
}

// closeWAL closes the log file Durable opened (Close).
func (s *Store) closeWAL() {
	s.wal.mu.Lock()
	defer s.wal.mu.Unlock()
	if s.wal.f != nil {
		_ = s.wal.f.Close()
		s.wal.f = nil
	}
}
