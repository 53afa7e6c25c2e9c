//go:build unix

package sqlite

import (
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on path so that only one process
// serves a data file (the in-memory indexes would otherwise diverge).
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s is in use by another process: %w (%v)", path, ErrInUse, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
