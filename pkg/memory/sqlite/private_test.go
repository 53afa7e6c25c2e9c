package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// TestOpenMakesTheDatabasePrivate: a new database is created 0600 (SQLite
// alone makes it 0644), and an existing world-readable one is tightened.
func TestOpenMakesTheDatabasePrivate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "engram.db")
	check := func() {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			st, err := os.Stat(p)
			if os.IsNotExist(err) && p != path {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s mode %o, want 600", filepath.Base(p), st.Mode().Perm())
			}
		}
	}
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	check()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check()
}
