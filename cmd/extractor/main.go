// Command extractor runs the extractor worker alone (the distributed
// deployment): it consumes turn_ended from ENGRAM_IN on ENGRAM_NATS_URL,
// stores transcripts, extracts memories with the configured Ollama model
// into the configured store (ENGRAM_REDIS_URL or SQLite), publishes
// memory_changed, and embeds memories that lack a vector. Configuration is
// read from ENGRAM_* variables and flags (-h lists them).
package main

import (
	"go.uber.org/fx"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/console/consolefx"
	"github.com/engram-memory/engram/internal/extract/extractfx"
	"github.com/engram-memory/engram/pkg/events"
)

func main() {
	app.RunWorker(events.ConsumerExtractor, fx.Options(extractfx.Module(), consolefx.Module()))
}
