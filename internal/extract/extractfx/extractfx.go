// Package extractfx wires the extractor into an fx application: its two
// turn_ended workers (registered with app.ProvideWorker, so `engram serve`
// and cmd/extractor run them the same way): the transcript consumer, which
// stores transcripts without the model, and the extractor consumer, gated on
// the model; and the backlog embedder, which runs for the life of the
// process.
//
// `engram serve` runs it when cmd/engram registers the module:
//
//	func init() { registerWorker(extractfx.Module()) }
package extractfx

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// Module is the extractor's fx module.
func Module() fx.Option {
	return fx.Module("extractor",
		fx.Provide(fx.Private, New),
		app.ProvideWorker(func(w *Worker) app.Worker { return w.AppWorker() }),
		app.ProvideWorker(func(w *Worker) app.Worker { return w.TranscriptWorker() }),
	)
}

// Worker is the extractor of a process with its backlog embedder.
type Worker struct {
	X       *extract.Extractor
	handler *extract.Handler
	client  *llm.Client
	store   memory.Store
	log     *zap.Logger

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// New builds the extractor on the process's store, model client and event
// client with the configured constants (ENGRAM_EXTRACT_*), and starts the
// backlog embedder with the lifecycle when this process runs the extractor
// (ENGRAM_WORKERS).
func New(lc fx.Lifecycle, cfg config.Config, topo events.Topology, st memory.Store, c *llm.Client, ec *events.Client, log *zap.Logger) (*Worker, error) {
	log = log.Named("extractor")
	if mp := cfg.LLM.MaxPredict; mp > 0 && mp < extract.PredictTokens() {
		return nil, fmt.Errorf("extractor: the model's max predict %d is below the %d tokens an extraction reply may need: raise it or set it to 0", mp, extract.PredictTokens())
	}
	emb := app.NewEmbedder(cfg, c)
	xcfg := Config(cfg.Extract, topo)
	rk := cfg.Inject.RankingFor(emb)
	xcfg.Ranking = &rk
	x, err := extract.New(st, c, emb, ec, xcfg)
	if err != nil {
		return nil, err
	}
	w := &Worker{X: x, handler: extract.NewHandler(x, log), client: c, store: st, log: log}
	if cfg.Runs(events.ConsumerExtractor) {
		lc.Append(fx.Hook{
			OnStart: func(context.Context) error { w.Start(); return nil },
			OnStop:  func(context.Context) error { w.Stop(); return nil },
		})
	}
	return w, nil
}

// Config is the configured extractor constants (ENGRAM_EXTRACT_*) fitted to
// the extractor's consumer: the session
// lease lasts at most half the ack wait (a dead holder's lease has expired by
// the time its event is redelivered, so that delivery can take the span
// over), and a span is given up before the consumer's last delivery.
func Config(xc extract.Config, topo events.Topology) extract.Config {
	if cc, ok := topo.Consumer(events.ConsumerExtractor); ok {
		if cc.AckWait > 0 {
			xc.LeaseTTL = min(xc.LeaseTTL, cc.AckWait/2)
		}
		if cc.MaxDeliver > 1 {
			xc.MaxInvalid = min(xc.MaxInvalid, cc.MaxDeliver-1)
		}
	}
	return xc
}

// AppWorker is the worker registration: the turn_ended handler on the
// extractor consumer, gated on the extraction model, with processed-event
// records in the store.
func (w *Worker) AppWorker() app.Worker {
	return app.Worker{
		Role:      events.ConsumerExtractor,
		Handler:   w.handler.Handle,
		Gates:     []runner.Gate{app.StoreGate(w.store), runner.GateFunc(extract.ModelGate(w.client))},
		Processed: w.store,
	}
}

// TranscriptWorker is the registration of the extractor's model-free part:
// the turn_ended handler that stores transcripts (Handler.Store) on the
// transcript consumer (events.ConsumerTranscript), gated on the store only,
// with processed-event records in the store. It runs wherever the extractor
// role runs (ENGRAM_WORKERS=extractor).
func (w *Worker) TranscriptWorker() app.Worker {
	return app.Worker{
		Role:      events.ConsumerExtractor,
		Consumer:  events.ConsumerTranscript,
		Handler:   w.handler.Store,
		Gates:     []runner.Gate{app.StoreGate(w.store)},
		Processed: w.store,
	}
}

// Start runs the backlog embedder until Stop.
func (w *Worker) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.X.RunBacklog(ctx, func(err error) { w.log.Warn("backlog embedding failed; retrying", zap.Error(err)) })
	}()
}

// Stop stops the backlog embedder and waits for it.
func (w *Worker) Stop() {
	if w.stop != nil {
		w.stop()
	}
	w.wg.Wait()
}
