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
//	app.ProvideWorker(func(s memory.Store, c *events.Client, l *zap.Logger) (app.Worker, error) {
//		h := inject.New(s, c, l)
//		return app.Worker{Role: events.ConsumerInjector, Handler: h.Handle, Processed: s}, nil
//	})
//
// Gates pause a worker's pulling while a dependency is down: StoreGate(s),
// ModelGate(c) (for workers that need the chat model).
//
// The workers module starts one runner per registered worker (those the
// config's ENGRAM_WORKERS selects) after the topology exists, and stops them
// (draining in-flight messages) on shutdown. `engram serve` registers every
// worker listed in cmd/engram (Workers there); a single-worker binary is
//
//	func main() { app.RunWorker(events.ConsumerInjector, injectorModule) }
package app
