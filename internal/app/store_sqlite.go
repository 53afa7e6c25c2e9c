package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// openSQLite opens (creating) the SQLite store at path.
func openSQLite(ctx context.Context, path string) (memory.Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("app: sqlite store: %w", err)
	}
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("app: sqlite store: %w", err)
	}
	return s, nil
}
