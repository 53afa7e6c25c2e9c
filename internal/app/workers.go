package app

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/internal/runner/dlq"
	"github.com/engram-memory/engram/pkg/events"
)

// Worker is one worker role's contribution: its handler on the durable
// consumer named Consumer (or Role). A role may contribute several workers,
// one per consumer (the extractor: its own consumer and the transcript
// consumer); ENGRAM_WORKERS selects them by role.
type Worker struct {
	// Role is the worker role (events.ConsumerInjector, ...): what
	// ENGRAM_WORKERS and ENGRAM_WORKER_CONCURRENCY name.
	Role string
	// Consumer is the durable consumer on ENGRAM_IN; "": Role. The
	// topology must have it, run by Role (events.ConsumerConfig.WorkerRole).
	Consumer string
	Handler  runner.Handler
	// Gates pause pulling while a dependency (model, store) is down.
	Gates []runner.Gate
	// Processed, when set, keeps processed-event records (usually the
	// memory store) so a redelivery is not applied twice.
	Processed runner.Processed
	// Letters, when set, is where the dead letters that ENGRAM_DLQ refuses
	// (full, unreachable) wait (the memory store): their events are then
	// terminated instead of holding the consumer's slots. Unset, a
	// Processed that is also a dlq.Shelf (the memory store) serves. The
	// process parks every worker's letters on the first selected worker's.
	Letters dlq.Shelf
	// The worker's acknowledgements wait until the store's writes would
	// survive the loss of one of its servers (runner.WithDurable; the Redis
	// store waits for a replica) when its Processed or Letters can say so
	// (the memory store does), unless AckUndurable.
	//
	// AckUndurable acknowledges the worker's events without asking the
	// store (no Durable): for a worker whose effect is not its writes (the
	// injector's is the reply it sent; its injection record, should a
	// failover or a power loss take it, is waited for by the extractor a
	// bounded time and the turn judged without it), so that a turn does
	// not pay an fsync or a replica's round trip.
	AckUndurable bool
	// Options are extra runner options.
	Options []runner.Option
}

// consumer is the worker's durable consumer.
func (w Worker) consumer() string {
	if w.Consumer != "" {
		return w.Consumer
	}
	return w.Role
}

// durable is what the worker's acknowledgements wait for (see Durable).
func (w Worker) durable() runner.Durable {
	if w.AckUndurable {
		return nil
	}
	if d, ok := w.Processed.(runner.Durable); ok {
		return d
	}
	if d, ok := w.Letters.(runner.Durable); ok {
		return d
	}
	return nil
}

// Workers are the running runners of a process.
type Workers struct {
	runners map[string]*runner.Runner
	order   []string
	parking *dlq.Parking // nil without a shelf
}

// WorkersOption configures StartWorkers.
type WorkersOption func(*workersOptions)

type workersOptions struct {
	shelf dlq.Shelf
	park  dlq.ParkingOptions
}

// ParkLettersOn parks the dead letters that ENGRAM_DLQ refuses (full,
// unreachable) on shelf (the process's memory store) instead of keeping
// their events in ENGRAM_IN: a poison event then never holds a consumer's
// ack-pending slots, and the letters move to the DLQ once it has room (one
// mover per process, dlq.Parking). o tunes the mover (zero: defaults).
func ParkLettersOn(shelf dlq.Shelf, o dlq.ParkingOptions) WorkersOption {
	return func(wo *workersOptions) { wo.shelf, wo.park = shelf, o }
}

// StartWorkers starts one runner per worker that cfg selects (ENGRAM_WORKERS,
// by role) on topo's consumers, with its role's concurrency, reporting to
// obs. Two workers on the same consumer are an error, as is a consumer the
// topology lacks or runs by another role.
func StartWorkers(ctx context.Context, js jetstream.JetStream, topo events.Topology, cfg config.Config,
	ws []Worker, obs runner.Observer, log *zap.Logger, opts ...WorkersOption) (*Workers, error) {
	var wo workersOptions
	for _, o := range opts {
		o(&wo)
	}
	w := &Workers{runners: map[string]*runner.Runner{}}
	var errs []error
	seen := map[string]bool{}
	var selected []Worker
	roles := map[string]bool{}
	for _, wk := range ws {
		name := wk.consumer()
		switch {
		case wk.Role == "" || wk.Handler == nil:
			errs = append(errs, fmt.Errorf("app: worker %q: role and handler are required", name))
		case seen[name]:
			errs = append(errs, fmt.Errorf("app: worker %q registered twice", name))
		default:
			if cc, ok := topo.Consumer(name); !ok {
				errs = append(errs, fmt.Errorf("app: worker %q: the topology has no consumer of that name", name))
			} else if r := cc.WorkerRole(); r != wk.Role {
				errs = append(errs, fmt.Errorf("app: worker %q: the topology's consumer is run by role %q, not %q", name, r, wk.Role))
			}
		}
		seen[name], roles[wk.Role] = true, true
		if cfg.Runs(wk.Role) {
			selected = append(selected, wk)
		}
	}
	for _, r := range cfg.Work.Workers {
		if r != "all" && r != "none" && !roles[r] {
			errs = append(errs, fmt.Errorf("app: ENGRAM_WORKERS names %q, which is not a registered worker", r))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Slice(selected, func(i, j int) bool { return selected[i].consumer() < selected[j].consumer() })
	for _, wk := range selected {
		if wo.shelf != nil {
			break
		}
		wo.shelf = wk.Letters
		if sh, ok := wk.Processed.(dlq.Shelf); ok && wo.shelf == nil {
			wo.shelf = sh
		}
	}
	if wo.shelf != nil && len(selected) > 0 {
		w.parking = dlq.NewParking(dlq.NewWriter(js, topo.Subjects()), wo.shelf, wo.park)
		w.parking.Start(moverLog(log.Named("dlq")))
	}
	for _, wk := range selected {
		name := wk.consumer()
		// The alert rules' counters exist at 0 from the start (see
		// health.Metrics.InitWorker).
		if in, ok := obs.(interface{ InitWorker(worker string) }); ok {
			in.InitWorker(name)
		}
		rc := runner.ConfigFor(topo, name)
		rc.Concurrency = cfg.ConcurrencyOf(wk.Role)
		opts := []runner.Option{runner.WithLogger(log), runner.WithGates(wk.Gates...)}
		if obs != nil {
			opts = append(opts, runner.WithObserver(obs))
		}
		if wk.Processed != nil {
			opts = append(opts, runner.WithProcessed(wk.Processed))
		}
		if w.parking != nil {
			opts = append(opts, runner.WithParking(w.parking))
		}
		if d := wk.durable(); d != nil {
			opts = append(opts, runner.WithDurable(d))
		}
		opts = append(opts, wk.Options...)
		r, err := runner.New(js, rc, wk.Handler, opts...)
		if err == nil {
			err = r.Start(ctx)
		}
		if err != nil {
			_ = w.Stop(ctx)
			return nil, fmt.Errorf("app: start worker %s: %w", name, err)
		}
		w.runners[name] = r
		w.order = append(w.order, name)
	}
	return w, nil
}

// Roles lists the running workers by consumer (a role's workers each).
func (w *Workers) Roles() []string { return append([]string(nil), w.order...) }

// Stop stops every runner, draining in-flight messages until ctx is done.
func (w *Workers) Stop(ctx context.Context) error {
	errs := make([]error, len(w.order))
	done := make(chan int)
	for i, role := range w.order {
		go func() {
			errs[i] = w.runners[role].Stop(ctx)
			done <- i
		}()
	}
	for range w.order {
		<-done
	}
	if w.parking != nil {
		w.parking.Stop()
	}
	return errors.Join(errs...)
}

// Parking is the process's dead-letter parking (nil without a shelf).
func (w *Workers) Parking() *dlq.Parking { return w.parking }

// moverLog logs the parking mover's failures: the first one, then at most
// one a minute while they go on (the DLQ can refuse for hours; /readyz and
// engram_dlq_parked_letters say so all along).
func moverLog(log *zap.Logger) func(error) {
	var last time.Time
	return func(err error) {
		if time.Since(last) < time.Minute {
			return
		}
		last = time.Now()
		log.Warn("parked dead letters wait: ENGRAM_DLQ refuses them", zap.Error(err))
	}
}

// Checks are the workers' readiness checks ("worker:<consumer>"): failed
// when the runner is not running, degraded while it is paused; and, with a
// parking, "dead-letters": degraded while dead letters wait in the store
// because ENGRAM_DLQ refuses them (events keep flowing), failed when a
// letter can be stored nowhere (its event then holds its consumer's slot).
func (w *Workers) Checks() []health.Check {
	var cs []health.Check
	if p := w.parking; p != nil {
		cs = append(cs, health.Check{Name: "dead-letters", Run: func(context.Context) error {
			msg, failed := p.Status().Problem()
			switch {
			case msg == "":
				return nil
			case failed:
				return errors.New(msg)
			}
			return health.Degraded(errors.New(msg))
		}})
	}
	for _, role := range w.order {
		r := w.runners[role]
		cs = append(cs, health.Check{Name: "worker:" + role, Run: func(context.Context) error {
			st := r.Status()
			switch {
			case !st.Running:
				return errors.New("not running")
			case st.Paused:
				return health.Degraded(fmt.Errorf("paused: %w", st.Cause))
			}
			return nil
		}})
	}
	return cs
}
