// Package consolidatefx wires the consolidator into an fx application: the
// session_idle worker, registered with app.ProvideWorker so that `engram
// serve` and cmd/consolidator run it the same way.
//
// `engram serve` runs it when cmd/engram registers the module:
//
//	func init() { registerWorker(consolidatefx.Module()) }
package consolidatefx

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// Module is the consolidator's fx module.
func Module() fx.Option {
	return fx.Module("consolidator", app.ProvideWorker(NewWorker))
}

// New builds the consolidator on the process's store, model client, event
// client and input stream (where a new turn_started is noticed) with the
// configured constants (ENGRAM_CONSOLIDATE_*) fitted to the consolidator's
// consumer, its passes counted on reg (nil: not counted).
func New(cfg config.Config, topo events.Topology, st memory.Store, c *llm.Client, ec *events.Client, js jetstream.JetStream, reg prometheus.Registerer) (*consolidate.Consolidator, error) {
	emb := app.NewEmbedder(cfg, c)
	opts := []consolidate.Option{
		consolidate.WithEmbedder(emb),
		consolidate.WithRanking(cfg.Inject.RankingFor(emb)),
		consolidate.WithPublisher(ec),
		consolidate.WithActivity(consolidate.NewStreamActivity(js, topo.In.Name, topo.Subjects())),
	}
	if reg != nil {
		m, err := NewMetrics(reg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, consolidate.WithObserver(m))
	}
	return consolidate.New(st, c, Config(cfg.Consolidate, topo), opts...)
}

// Metrics count the consolidation passes by verdict (done, budget, stuck,
// skipped) and the messages their windows spanned: a growing skipped
// count means a model that cannot consolidate (it answers in prose, or
// never calls memory_done) and messages moved past unconsolidated.
type Metrics struct {
	passes   *prometheus.CounterVec
	messages *prometheus.CounterVec
}

// NewMetrics registers the consolidator's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engram_consolidation_passes_total",
			Help: "Consolidation passes ended, by verdict (done, budget, stuck, skipped: a window passed over after its last attempt).",
		}, []string{"verdict"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engram_consolidation_messages_total",
			Help: "Transcript messages spanned by the windows of ended consolidation passes, by verdict (skipped: moved past unconsolidated).",
		}, []string{"verdict"}),
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.passes, m.messages} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}

// PassEnded implements consolidate.Observer.
func (m *Metrics) PassEnded(v consolidate.Verdict, messages int64) {
	m.passes.WithLabelValues(string(v)).Inc()
	if messages > 0 {
		m.messages.WithLabelValues(string(v)).Add(float64(messages))
	}
}

// NewWorker returns the worker registration: the session_idle handler on
// the consolidator consumer, paused while the store or the models are down,
// with processed-event records in the store (a finished pass is not run
// again for a redelivered event).
func NewWorker(cfg config.Config, topo events.Topology, st memory.Store, c *llm.Client, ec *events.Client, js jetstream.JetStream, tel *app.Telemetry, log *zap.Logger) (app.Worker, error) {
	log = log.Named("consolidator")
	var reg prometheus.Registerer
	if tel != nil {
		reg = tel.Registry
	}
	cons, err := New(cfg, topo, st, c, ec, js, reg)
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
