// Command injector runs only the injector worker: it answers turn_started
// events with the memory block, against ENGRAM_NATS_URL and the configured
// store (ENGRAM_STORE, ENGRAM_REDIS_URL). Scale it by replicas; every
// setting is an ENGRAM_* variable (see docs/configuration.md).
package main

import (
	"go.uber.org/fx"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/console/consolefx"
	"github.com/engram-memory/engram/internal/inject/injectfx"
	"github.com/engram-memory/engram/pkg/events"
)

func main() {
	app.RunWorker(events.ConsumerInjector, fx.Options(injectfx.Module(), consolefx.Module()))
}
