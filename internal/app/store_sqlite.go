package app

import (
	"context"
	"fmt"

	"github.com/engram-memory/engram/pkg/memory"
)

// openSQLite opens the SQLite store. (pkg/memory/sqlite is not in the tree
// yet; until it is, the sqlite store kind reports that it is unavailable.)
func openSQLite(_ context.Context, path string) (memory.Store, error) {
	return nil, fmt.Errorf("%w: sqlite (%s): pkg/memory/sqlite is not built yet", errNoStore, path)
}
