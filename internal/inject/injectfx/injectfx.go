// Package injectfx wires the injector into an fx application: the
// turn_started worker, registered with app.ProvideWorker so that
// `engram serve` and cmd/injector run it the same way.
package injectfx

import (
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// LaneRefresh is how often the injector looks for lanes created, changed
// or deleted by setup.
var LaneRefresh = 5 * time.Second

// Module is the injector's fx module.
func Module() fx.Option {
	return fx.Module("injector", app.ProvideWorker(NewWorker))
}

// NewWorker builds the injector on the process's store and embedder and
// returns its worker registration: the turn_started handler on the
// injector consumer, paused while the store is down. It keeps no
// processed-event records: a redelivered turn_started is either past its
// reply deadline (skipped by the handler) or answered again, which is
// harmless (the injection record is overwritten with the same turn's ids,
// the second reply finds nobody waiting, and injection_ready carries the
// same message id, so the stream drops the copy), while the records would
// cost a read and a write transaction on every turn. (One leftover: a
// turn_started without a reply deadline, redelivered after the extractor
// took the turn's record, writes that record again, and nothing takes it.) It has no model gate: the injector must answer even when the chat model is down
// (the hashing embedder needs no model; an Ollama embedder that fails
// leaves recall out of that turn's block, standing instructions still go).
func NewWorker(cfg config.Config, st memory.Store, c *llm.Client, ec *events.Client, log *zap.Logger) (app.Worker, error) {
	log = log.Named("injector")
	emb := app.NewEmbedder(cfg, c)
	inj, err := inject.New(st, emb, cfg.Inject)
	if err != nil {
		return app.Worker{}, err
	}
	h := inject.NewHandler(inj, ec, log, inject.WithReplyPrefixes(cfg.Events.ReplyPrefixes...))
	return app.Worker{
		Role:    events.ConsumerInjector,
		Handler: h.Handle,
		Gates:   []runner.Gate{app.ServingStoreGate(st)},
		// A flood from one tenant, project or session cannot push the
		// others' turns past their reply deadline: the runner holds what
		// the consumer allows (its max ack pending) and serves senders in
		// turn, and a turn past its deadline is acknowledged before any
		// store work (counted as expired, logged like a late turn).
		// Each named tenant's turns are also pulled from its own lane
		// (events.EnsureLanes): another tenant's backlog in the stream is
		// never in front of them.
		Options: []runner.Option{runner.WithFairness(0), runner.WithDeadline(inject.ReplyBy, h.Expired),
			runner.WithLanes(events.LaneNames(), LaneRefresh)},
		// A poison turn_started whose letter ENGRAM_DLQ refuses waits in
		// the store, not in the injector's ack-pending slots.
		Letters: st,
		// Its effect is the reply; the injection record is the
		// extractor's to wait for (a bounded time): no fsync or replica
		// round trip a turn.
		AckUndurable: true,
	}, nil
}
