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
//			Gates: []runner.Gate{app.ServingStoreGate(st)}}, nil
//	})
//
// (that is internal/inject/injectfx; a worker whose handler must not run
// twice for one event also sets Processed: st, as the extractor does).
//
// Gates pause a worker's pulling while a dependency is down: StoreGate(s)
// (also while a SQLite store is still loading its memories after start),
// ServingStoreGate(s) (the injector's: open while the store loads, so that
// turns are answered from what is loaded), ModelGate(c) (for workers that
// need the chat model).
//
// # Start-up with a big store
//
// StoreModule opens a SQLite store with sqlite.WithBackgroundLoad: the
// process is ready once the database file is open, whatever its size, and
// the store loads its memories into its in-memory indexes in the
// background (standing instructions first, then every memory, then the
// vector graphs). Until then the injector answers from the memories loaded
// so far and the other workers wait (StoreGate); StoreCheck reports the
// progress as degraded, the engram_store_index_loading gauges are 1 and
// the store logger says when each part is loaded. Tests hold the load at a
// known point by supplying SQLiteOptions (sqlite.WithLoadHook) to the
// graph. OpenStore, for the command-line tools, returns the store loaded.
//
// The workers module starts one runner per registered worker (those the
// config's ENGRAM_WORKERS selects) after the topology exists, and stops them
// (draining in-flight messages) on shutdown. `engram serve` registers every
// worker that a file of cmd/engram registers with registerWorker (worker_*.go);
// a single-worker binary is
//
//	func main() { app.RunWorker(events.ConsumerInjector, injectorModule) }
package app
