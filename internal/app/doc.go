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
// # When the bus fails
//
// StartWorkers gives every runner of the process one dead-letter parking
// (dlq.Parking) on the first selected worker's Letters (or Processed, when
// it is a dlq.Shelf: the memory store): a letter ENGRAM_DLQ refuses waits in
// the store and its event is terminated, so poison never holds a
// consumer's slots; the readiness check "dead-letters" says when letters
// wait. OpenBus starts a guard on the embedded server's JetStream store
// (natsembed.Guard): after a full disk the streams refuse every write until
// JetStream is restarted, which the guard does once there is room, then
// forces the connection to reconnect (the runners then distrust first
// deliveries of what was stored before); the readiness check "nats" fails
// meanwhile. A topology the store cannot hold (its streams' max bytes over
// what JetStream may reserve) fails the start with one sizing line
// (sizing.go), and every start-up failure is reported as its cause
// (dig.RootCause), fx's graph of it at debug level.
//
// The workers module starts one runner per registered worker (those the
// config's ENGRAM_WORKERS selects) after the topology exists, and stops them
// (draining in-flight messages) on shutdown. `engram serve` registers every
// worker that a file of cmd/engram registers with registerWorker (worker_*.go);
// a single-worker binary is
//
//	func main() { app.RunWorker(events.ConsumerInjector, injectorModule) }
package app

// # NATS authentication
//
// OpenBus decides how the process meets the bus (see internal/natsauth for
// the roles and their permissions):
//
//   - `engram serve` with its embedded server: the role passwords and the
//     JetStream store key are generated into the data dir on first start
//     (0600, the dir 0700); the server requires the role users (bcrypt
//     hashes of those passwords) and encrypts its store; serve itself
//     connects in-process as admin and runs every worker on that one
//     connection. ENGRAM_INSECURE turns the users off (throwaway use).
//   - Any other process connects as ProcessRole: the one worker role it
//     runs (a worker binary; serve -workers none is the idle detector), else
//     admin. Credentials come from the ENGRAM_NATS_* settings, or, for a
//     local server only, from the data dir (ClientAuth); the CLI does the
//     same as admin (ConnectOptions).
//   - Worker processes use the reply-inbox prefix natsauth.InboxPrefix(role),
//     not _INBOX., so platforms (allowed _INBOX.>) never see their traffic.
//
// After connecting, natsauth.Verify reads the connection's permissions from
// the server and the start fails with every subject the process's roles
// need but may not use. A process that may not create streams (every role
// but admin and setup) only checks that they exist (CheckTopology).
// Permission violations that still happen later are logged as errors by the
// connection's error handler.
