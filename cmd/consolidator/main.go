// Command consolidator runs the consolidator worker alone (the distributed
// deployment): it consumes session_idle from ENGRAM_IN on ENGRAM_NATS_URL,
// runs a bounded, tool-calling memory pass over the quiet session with the
// configured Ollama model against the configured store (ENGRAM_REDIS_URL or
// SQLite), and publishes consolidation_done. Configuration is read from
// ENGRAM_* variables and flags (-h lists them).
package main

import (
	"go.uber.org/fx"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/console/consolefx"
	"github.com/engram-memory/engram/internal/consolidate/consolidatefx"
	"github.com/engram-memory/engram/pkg/events"
)

func main() {
	app.RunWorker(events.ConsumerConsolidator, fx.Options(consolidatefx.Module(), consolefx.Module()))
}
