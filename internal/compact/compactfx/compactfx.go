// Package compactfx wires the compactor into an fx application: the
// tokens_reported worker (registered with app.ProvideWorker, so `engram
// serve` and cmd/compactor run it the same way) and the context service
// (events.Client.ServeContext), which answers platforms' context requests
// for the life of the process.
//
// `engram serve` runs it when cmd/engram registers the module:
//
//	func init() { registerWorker(compactfx.Module()) }
package compactfx

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// Module is the compactor's fx module.
func Module() fx.Option {
	return fx.Module("compactor",
		fx.Provide(fx.Private, New),
		app.ProvideWorker(func(w *Worker) app.Worker { return w.AppWorker() }),
	)
}

var _ compact.Metrics = (*health.Metrics)(nil)

// ContextTimeout bounds one context request's store reads.
const ContextTimeout = 10 * time.Second

// Worker is the compactor of a process with its context service.
type Worker struct {
	C       *compact.Compactor
	handler *compact.Handler
	client  *llm.Client
	store   memory.Store
	events  *events.Client
	cfg     config.Config
	log     *zap.Logger

	svc *events.ContextService
}

// New builds the compactor on the process's store, model client and event
// client with the configured constants (ENGRAM_COMPACT_*; the summarize
// model's window is ENGRAM_SUMMARIZE_CONTEXT_LENGTH, else the model's
// own), counting refused summaries in the process's metrics, and starts
// the context service with the lifecycle when this process runs the
// compactor (ENGRAM_WORKERS).
func New(lc fx.Lifecycle, cfg config.Config, topo events.Topology, js jetstream.JetStream, st memory.Store, c *llm.Client, ec *events.Client, tel *app.Telemetry, log *zap.Logger) (*Worker, error) {
	log = log.Named("compactor")
	opts := []compact.Option{compact.WithExtractorLag(events.NewTranscriptLag(js, topo))}
	if tel != nil && tel.Metrics != nil {
		opts = append(opts, compact.WithMetrics(tel.Metrics))
	}
	cc, err := compact.New(st, c, ec, Config(cfg.Compact, topo), opts...)
	if err != nil {
		return nil, err
	}
	w := &Worker{C: cc, handler: compact.NewHandler(cc, log), client: c, store: st, events: ec, cfg: cfg, log: log}
	if cfg.Runs(events.ConsumerCompactor) {
		lc.Append(fx.Hook{
			OnStart: func(context.Context) error { return w.Start() },
			OnStop:  func(context.Context) error { return w.Stop() },
		})
	}
	return w, nil
}

// Config is the configured compactor constants (ENGRAM_COMPACT_*) fitted to
// the compactor's consumer: the session lease lasts at most half the ack
// wait (a dead holder's lease has expired by the time its event is
// redelivered), and a report is given up before the consumer's last
// delivery.
func Config(cc compact.Config, topo events.Topology) compact.Config {
	if c, ok := topo.Consumer(events.ConsumerCompactor); ok {
		if c.AckWait > 0 {
			cc.LeaseTTL = min(cc.LeaseTTL, c.AckWait/2)
		}
		if c.MaxDeliver > 1 {
			cc.MaxFailures = min(cc.MaxFailures, c.MaxDeliver-1)
		}
	}
	return cc
}

// AppWorker is the worker registration: the tokens_reported handler on the
// compactor consumer, gated on the store and the summarize model, with
// processed-event records in the store.
func (w *Worker) AppWorker() app.Worker {
	return app.Worker{
		Role:      events.ConsumerCompactor,
		Handler:   w.handler.Handle,
		Gates:     []runner.Gate{app.StoreGate(w.store), runner.GateFunc(compact.ModelGate(w.client))},
		Processed: w.store,
	}
}

// Start starts the context service.
func (w *Worker) Start() error {
	svc, err := w.events.ServeContext(w.C.Context, w.cfg.ConcurrencyOf(events.ConsumerCompactor)*4, ContextTimeout)
	if err != nil {
		return err
	}
	w.svc = svc
	return nil
}

// Stop stops the context service and waits for the requests in flight.
func (w *Worker) Stop() error {
	if w.svc == nil {
		return nil
	}
	return w.svc.Stop()
}
