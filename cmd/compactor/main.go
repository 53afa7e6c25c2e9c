// Command compactor runs the compactor worker alone (the distributed
// deployment): it consumes tokens_reported from ENGRAM_IN on
// ENGRAM_NATS_URL, summarises the older messages of conversations whose
// context passed the threshold with the configured Ollama model
// (ENGRAM_SUMMARIZE_MODEL) into the configured store (ENGRAM_REDIS_URL or
// SQLite), publishes compaction_done, and answers the context API
// (<prefix>.api.context.<project>.<session>). Configuration is read from
// ENGRAM_* variables and flags (-h lists them).
package main

import (
	"go.uber.org/fx"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/compact/compactfx"
	"github.com/engram-memory/engram/internal/console/consolefx"
	"github.com/engram-memory/engram/pkg/events"
)

func main() {
	app.RunWorker(events.ConsumerCompactor, fx.Options(compactfx.Module(), consolefx.Module()))
}
