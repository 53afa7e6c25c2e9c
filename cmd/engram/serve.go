package main

import (
	"context"
	"io"

	"go.uber.org/fx"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/pkg/memory"
)

func init() {
	register("serve", "run Engram: embedded NATS (or ENGRAM_NATS_URL), store, workers, idle detector, health", serve)
}

func serve(ctx context.Context, _ io.Writer, args []string) error {
	cfg, _, err := loadConfig("serve", args, config.All, nil)
	if err != nil {
		return err
	}
	// serve opens the store even when no worker asks for it yet, so that a
	// broken data dir shows at start and /readyz reports the store.
	opts := append([]fx.Option{fx.Invoke(func(memory.Store) {})}, workerModules...)
	opts = append(opts, serveModules...)
	return app.Serve(ctx, cfg, true, "engram-serve", opts...)
}

// serveModules are what `engram serve` runs beside its workers (the
// memory tool's HTTP endpoint); a file of this folder adds one with
// registerServe in an init function.
var serveModules []fx.Option

func registerServe(m fx.Option) { serveModules = append(serveModules, m) }
