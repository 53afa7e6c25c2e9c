// Package consolidatefx wires the consolidator into an fx application: the
// session_idle worker, registered with app.ProvideWorker so that `engram
// serve` and cmd/consolidator run it the same way.
//
// `engram serve` runs it when cmd/engram registers the module:
//
//	func init() { registerWorker(consolidatefx.Module()) }
package consolidatefx

import (
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// The process's metrics count the passes.
var _ consolidate.Observer = (*health.Metrics)(nil)

// Module is the consolidator's fx module.
func Module() fx.Option {
	return fx.Module("consolidator", app.ProvideWorker(NewWorker))
}

// New builds the consolidator on the process's store, model client, event
// client and input stream (where a new turn_started is noticed) with the
// configured constants (ENGRAM_CONSOLIDATE_*) fitted to the consolidator's
// consumer, its passes counted by obs (nil: not counted; a process's
// health.Metrics).
func New(cfg config.Config, topo events.Topology, st memory.Store, c *llm.Client, ec *events.Client, js jetstream.JetStream, obs consolidate.Observer) (*consolidate.Consolidator, error) {
	emb := app.NewEmbedder(cfg, c)
	opts := []consolidate.Option{
		consolidate.WithEmbedder(emb),
		consolidate.WithRanking(cfg.Inject.RankingFor(emb)),
		consolidate.WithPublisher(ec),
		consolidate.WithActivity(consolidate.NewStreamActivity(js, topo.In.Name, topo.Subjects())),
	}
	if obs != nil {
		opts = append(opts, consolidate.WithObserver(obs))
	}
	return consolidate.New(st, c, ConfigFor(cfg, topo), opts...)
}

// ConfigFor is Config with the consolidation model's window when it is
// set (ENGRAM_CONSOLIDATE_CONTEXT_LENGTH), so that one too small for a
// step's prompt is refused at start.
func ConfigFor(cfg config.Config, topo events.Topology) consolidate.Config {
	cc := Config(cfg.Consolidate, topo)
	if n := cfg.LLM.Consolidate.ContextLength; n > 0 {
		cc.ContextTokens = n
	}
	return cc
}

// NewWorker returns the worker registration: the session_idle handler on
// the consolidator consumer, paused while the store or the models are down,
// with processed-event records in the store (a finished pass is not run
// again for a redelivered event).
func NewWorker(cfg config.Config, topo events.Topology, st memory.Store, c *llm.Client, ec *events.Client, js jetstream.JetStream, tel *app.Telemetry, log *zap.Logger) (app.Worker, error) {
	log = log.Named("consolidator")
	var obs consolidate.Observer
	if tel != nil && tel.Metrics != nil {
		obs = tel.Metrics
	}
	cons, err := New(cfg, topo, st, c, ec, js, obs)
	if err != nil {
		return app.Worker{}, err
	}
	return app.Worker{
		Role:      events.ConsumerConsolidator,
		Handler:   consolidate.NewHandler(cons, log).Handle,
		Gates:     []runner.Gate{app.StoreGate(st), app.ModelGate(c)},
		Processed: st,
	}, nil
}

// Config is the configured constants fitted to the consolidator's consumer:
// the session lease lasts at most half the ack wait, so a dead holder's
// lease has expired by the time its event is redelivered and that delivery
// can resume the pass from its journal.
func Config(cc consolidate.Config, topo events.Topology) consolidate.Config {
	if c, ok := topo.Consumer(events.ConsumerConsolidator); ok && c.AckWait > 0 {
		cc.LeaseTTL = min(cc.LeaseTTL, c.AckWait/2)
	}
	return cc
}
