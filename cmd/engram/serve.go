package main

import (
	"context"
	"io"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
)

func init() {
	register("serve", "run Engram: embedded NATS (or ENGRAM_NATS_URL), store, workers, idle detector, health", serve)
}

func serve(ctx context.Context, _ io.Writer, args []string) error {
	cfg, _, err := loadConfig("serve", args, config.All, nil)
	if err != nil {
		return err
	}
	return app.Serve(ctx, cfg, true, "engram-serve", workerModules...)
}
