package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// openStore opens the configured store for a command that reads or writes
// it itself. When the SQLite database is held by another process (one
// process per database file), the error says that a running `engram serve`
// holds it and what to do instead (instead: the way through the running
// serve, when the command has one).
func openStore(ctx context.Context, cfg config.Config, instead string) (memory.Store, error) {
	st, err := app.OpenStore(ctx, cfg)
	if err != nil && errors.Is(err, sqlite.ErrInUse) {
		path := cfg.SQLitePath()
		what := "stop it first (Ctrl-C, or SIGTERM; it drains and exits), run this, then start it again"
		if instead != "" {
			what = instead + ", or " + what
		}
		return nil, fmt.Errorf("the SQLite database %s is held by another process, most likely a running `engram serve` "+
			"(one process per database file): %s; with ENGRAM_STORE=redis serve and this command share the store", path, what)
	}
	return st, err
}
