// Package app composes Engram's processes: it turns a config.Config into a
// running NATS connection (or an embedded server), the JetStream topology, a
// memory store, the model client, the health/metrics endpoint, the idle
// detector and the workers.
//
// Every component has a plain constructor usable without fx (NewLogger,
// OpenBus, OpenStore, NewLLM, StartHTTP, StartIdle, StartWorkers) and a thin
// fx module around it (fx.go). Domain packages never import fx; this package
// and cmd/ do.
//
// # Workers
//
// A worker is a Worker value (role = its durable consumer name, handler,
// gates, processed-event records). A worker module contributes it to the
// "workers" value group with ProvideWorker:
//
//	app.ProvideWorker(func(cfg config.Config, st memory.Store, c *llm.Client, ec *events.Client, l *zap.Logger) (app.Worker, error) {
//		inj, err := inject.New(st, app.NewEmbedder(cfg, c), cfg.Inject)
//		if err != nil {
//			return app.Worker{}, err
//		}
//		return app.Worker{Role: events.ConsumerInjector, Handler: inject.NewHandler(inj, ec, l).Handle,
//			Gates: []runner.Gate{app.StoreGate(st)}}, nil
//	})
//
// (that is internal/inject/injectfx; a worker whose handler must not run
// twice for one event also sets Processed: st, as the extractor does).
//
// Gates pause a worker's pulling while a dependency is down: StoreGate(s),
// ModelGate(c) (for workers that need the chat model).
//
// The workers module starts one runner per registered worker (those the
// config's ENGRAM_WORKERS selects) after the topology exists, and stops them
// (draining in-flight messages) on shutdown. `engram serve` registers every
// worker that a file of cmd/engram registers with registerWorker (worker_*.go);
// a single-worker binary is
//
//	func main() { app.RunWorker(events.ConsumerInjector, injectorModule) }
package app
