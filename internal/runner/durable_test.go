package runner_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
	"go.uber.org/zap/zaptest"
)

// replicas is a runner.Durable whose first calls say the store's writes
// are not on a replica yet; it notes how far the consumer had acknowledged
// at each of them.
type replicas struct {
	mu      sync.Mutex
	behind  int // calls left that fail
	calls   int
	ackedAt []uint64
	floor   func() uint64
}

func (r *replicas) Durable(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.behind > 0 {
		r.behind--
		r.ackedAt = append(r.ackedAt, r.floor())
		return fmt.Errorf("primary 10.0.0.1:6379: %w: none of its 1 replicas acknowledged its writes within 2s", memory.ErrUnavailable)
	}
	return nil
}

// startCounting starts h's runner with processed-event records, d as its
// Durable and a handler that succeeds, counting its calls.
func startCounting(h *harness, cfg runner.Config, d runner.Durable) *atomic.Int32 {
	var handled atomic.Int32
	h.start(cfg, func(context.Context, events.Envelope) error {
		handled.Add(1)
		return nil
	}, runner.WithProcessed(newMemProcessed()), runner.WithDurable(d))
	return &handled
}

// A handled event is acknowledged only once the store says its writes
// would survive the loss of a server (the Redis store: on a replica): until
// then it waits without spending a delivery, and is not handled again (its
// processed record answers).
func TestAckWaitsForDurableWrites(t *testing.T) {
	h := newHarness(t, func(c *events.ConsumerConfig) { c.MaxDeliver = 2 })
	cfg := h.config()
	cfg.WaitMax = 20 * time.Millisecond
	d := &replicas{behind: 3, floor: func() uint64 { return h.consumer().AckFloor.Stream }}
	handled := startCounting(h, cfg, d)
	h.publish(1)
	eventually(t, "acked", func() bool { return h.consumer().AckFloor.Stream == 1 })
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.calls != 4 || len(d.ackedAt) != 3 {
		t.Fatalf("Durable called %d times (%d refused), want 4 (3)", d.calls, len(d.ackedAt))
	}
	for i, f := range d.ackedAt {
		if f != 0 {
			t.Fatalf("refusal %d: the event was acknowledged already (ack floor %d)", i+1, f)
		}
	}
	if n := handled.Load(); n != 1 {
		t.Fatalf("handled %d times, want once", n)
	}
	if n := h.obs.count(runner.ResultUndurable); n != 3 {
		t.Fatalf("%d waits, want 3: %+v", n, h.obs.all())
	}
	for _, o := range h.obs.all() {
		if o.Delivery != 1 {
			t.Fatalf("a wait for the replicas spent a delivery: %+v", o)
		}
	}
	if len(h.letters()) != 0 || h.consumer().NumRedelivered != 0 {
		t.Fatalf("letters %d, redelivered %d", len(h.letters()), h.consumer().NumRedelivered)
	}
}

// An event whose writes stay undurable past MaxWait goes back to the
// stream, and never to the dead letters, however many deliveries that
// takes: its handling is done; once the store is durable it is
// acknowledged.
func TestUndurablePastMaxWaitIsNeverDeadLettered(t *testing.T) {
	h := newHarness(t, func(c *events.ConsumerConfig) { c.MaxDeliver = 2 })
	cfg := h.config()
	cfg.WaitMax = 10 * time.Millisecond
	cfg.MaxWait = 50 * time.Millisecond
	cfg.UnavailableDelay = 50 * time.Millisecond
	d := &replicas{behind: 1 << 30, floor: func() uint64 { return 0 }}
	handled := startCounting(h, cfg, d)
	h.publish(1)
	eventually(t, "delivered past the limit", func() bool {
		for _, o := range h.obs.all() {
			if o.Delivery > 2 && o.Result == runner.ResultUndurable {
				return true
			}
		}
		return false
	})
	if n := len(h.letters()); n != 0 {
		t.Fatalf("%d letters: a handled event was dead-lettered for its durability", n)
	}
	if f := h.consumer().AckFloor.Stream; f != 0 {
		t.Fatalf("acknowledged (floor %d) while not durable", f)
	}
	d.mu.Lock()
	d.behind = 0
	d.mu.Unlock()
	eventually(t, "acked once durable", func() bool { return h.consumer().AckFloor.Stream == 1 })
	if n := handled.Load(); n != 1 {
		t.Fatalf("handled %d times, want once", n)
	}
}

// slowMark is a Processed record whose writes take a while.
type slowMark struct {
	*memProcessed
	delay time.Duration
}

func (s slowMark) MarkEventProcessed(ctx context.Context, project memory.ProjectRef, consumer, id string, ttl time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(s.delay):
	}
	return s.memProcessed.MarkEventProcessed(ctx, project, consumer, id, ttl)
}

// The work after the handler (its processed record, Durable) is kept
// alive as the handler was: a record slower than what is left of the ack
// wait since the handler's last heartbeat does not get the event
// delivered, and handled, again.
func TestStepsAfterTheHandlerAreKeptAlive(t *testing.T) {
	const ackWait = time.Second
	h := newHarness(t, func(c *events.ConsumerConfig) { c.AckWait = ackWait })
	var handled atomic.Int32
	h.start(h.config(), func(ctx context.Context, _ events.Envelope) error {
		handled.Add(1)
		time.Sleep(ackWait * 6 / 10) // one heartbeat, at a third
		return nil
	}, runner.WithProcessed(slowMark{newMemProcessed(), ackWait * 9 / 10}), runner.WithDurable(&replicas{floor: func() uint64 { return 0 }}))
	h.publish(1)
	eventually(t, "acked", func() bool { return h.consumer().AckFloor.Stream == 1 })
	time.Sleep(ackWait / 2) // a redelivery would have come by now
	if n := handled.Load(); n != 1 {
		t.Fatalf("handled %d times, want once", n)
	}
	for _, o := range h.obs.all() {
		if o.Delivery != 1 {
			t.Fatalf("the server delivered the event again while its processed record was written: %+v", o)
		}
	}
	if ci := h.consumer(); ci.NumRedelivered != 0 || ci.NumAckPending != 0 {
		t.Fatalf("redelivered %d, ack pending %d", ci.NumRedelivered, ci.NumAckPending)
	}
}

// failingOver is a runner.Durable that counts failovers: the first calls
// of Durable see one each (a primary replaced while the handler ran), the
// first of them also refusing, as Durable does while the cluster settles.
type failingOver struct {
	mu        sync.Mutex
	bumps     int // calls left that count a failover
	refuse    int // calls left that refuse
	calls     int
	failovers atomic.Uint64
}

func (f *failingOver) Durable(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.bumps > 0 {
		f.bumps--
		f.failovers.Add(1)
	}
	if f.refuse > 0 {
		f.refuse--
		return fmt.Errorf("primary 10.0.0.1:6379: %w: connection refused", memory.ErrUnavailable)
	}
	return nil
}

func (f *failingOver) Failovers() uint64 { return f.failovers.Load() }

// A failover counted after a handler began gets it run again before the
// event is acknowledged (its writes may be gone with the primary): once
// per failover, up to three times, in the same delivery, also when the
// event waited for durability in between (its processed record found).
func TestFailoverHandlesTheEventAgain(t *testing.T) {
	for _, tc := range []struct {
		name          string
		bumps, refuse int
		handled       int32
	}{
		{"one failover", 1, 0, 2},
		{"a failover, then a wait", 1, 1, 2},
		{"failovers without end", 1 << 20, 0, 4},
		{"none", 0, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *events.ConsumerConfig) { c.MaxDeliver = 2 })
			cfg := h.config()
			cfg.WaitMax = 20 * time.Millisecond
			d := &failingOver{bumps: tc.bumps, refuse: tc.refuse}
			handled := startCounting(h, cfg, d)
			h.publish(1)
			eventually(t, "acked", func() bool { return h.consumer().AckFloor.Stream == 1 })
			if n := handled.Load(); n != tc.handled {
				t.Fatalf("handled %d times, want %d", n, tc.handled)
			}
			for _, o := range h.obs.all() {
				if o.Delivery != 1 {
					t.Fatalf("a failover spent a delivery: %+v", o)
				}
			}
			if n := h.obs.count(runner.ResultAcked) + h.obs.count(runner.ResultDuplicate); n != 1 {
				t.Fatalf("%d acknowledgements, want 1: %+v", n, h.obs.all())
			}
			if len(h.letters()) != 0 || h.consumer().NumRedelivered != 0 {
				t.Fatalf("letters %d, redelivered %d", len(h.letters()), h.consumer().NumRedelivered)
			}
		})
	}
}

// A handler run again for a failover that fails (a transient error, or
// Wait) is run until it succeeds, in the same delivery: back on the stream,
// the processed record of its first run would get the event acknowledged
// as handled, its writes lost with the primary never made again.
func TestFailedRunAgainIsNotAcknowledgedAsHandled(t *testing.T) {
	for _, wait := range []bool{false, true} {
		t.Run(map[bool]string{false: "transient", true: "wait"}[wait], func(t *testing.T) {
			h := newHarness(t, func(c *events.ConsumerConfig) { c.MaxDeliver = 5 })
			cfg := h.config()
			cfg.WaitMax = 20 * time.Millisecond
			d := &failingOver{bumps: 1}
			var handled, ok atomic.Int32
			h.start(cfg, func(context.Context, events.Envelope) error {
				if handled.Add(1) == 2 {
					if wait {
						return runner.Wait(errors.New("not yet"))
					}
					return errors.New("the store settles after the failover")
				}
				ok.Add(1)
				return nil
			}, runner.WithProcessed(newMemProcessed()), runner.WithDurable(d))
			h.publish(1)
			eventually(t, "acked", func() bool { return h.consumer().AckFloor.Stream == 1 })
			if n := ok.Load(); n != 2 || handled.Load() != 3 {
				t.Fatalf("handled %d times, %d of them successfully, want 3 and 2: %+v", handled.Load(), n, h.obs.all())
			}
			if n := h.obs.count(runner.ResultDuplicate); n != 0 {
				t.Fatalf("acknowledged as handled before its run again succeeded: %+v", h.obs.all())
			}
			for _, o := range h.obs.all() {
				if o.Delivery != 1 {
					t.Fatalf("the failed run again went back to the stream: %+v", o)
				}
			}
		})
	}
}

// A worker stopped while a run again for a failover is due hands the event
// back to the stream with its processed records written by the first run:
// the next delivery runs the handler again (the run again is recorded as
// owed until it succeeds) instead of acknowledging it as handled, its
// writes lost with the primary never made again.
func TestRunAgainOwedAcrossAStop(t *testing.T) {
	h := newHarness(t, func(c *events.ConsumerConfig) { c.MaxDeliver = 5 })
	cfg := h.config()
	cfg.WaitMax = 20 * time.Millisecond
	procs := newMemProcessed()
	var first atomic.Int32
	began := make(chan struct{})
	r1, err := runner.New(h.js, cfg, func(ctx context.Context, _ events.Envelope) error {
		if first.Add(1) == 2 { // the run again: the worker stops meanwhile
			close(began)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}, runner.WithLogger(zaptest.NewLogger(t)), runner.WithObserver(h.obs), runner.WithProcessed(procs),
		runner.WithDurable(&failingOver{bumps: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.publish(1)
	select {
	case <-began:
	case <-time.After(waitLong):
		t.Fatal("the handler was not run again after the failover")
	}
	sctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_ = r1.Stop(sctx) // the run again is cut off: the event goes back to the stream
	cancel()

	nextWorkerRunsItAgain(t, h, cfg, procs)
}

// nextWorkerRunsItAgain starts a worker on procs, the processed records of
// a worker that stopped owing a run again of h's one event, and checks
// that it runs the handler once and acknowledges the event, not as a
// duplicate.
func nextWorkerRunsItAgain(t *testing.T, h *harness, cfg runner.Config, procs *memProcessed) {
	t.Helper()
	var second atomic.Int32
	h.start(cfg, func(context.Context, events.Envelope) error {
		second.Add(1)
		return nil
	}, runner.WithProcessed(procs), runner.WithDurable(&failingOver{}))
	eventually(t, "acked", func() bool { return h.consumer().AckFloor.Stream == 1 })
	if n := second.Load(); n != 1 {
		t.Fatalf("the next worker handled the event %d times, want 1 (the run again it was owed): %+v", n, h.obs.all())
	}
	if n := h.obs.count(runner.ResultDuplicate); n != 0 {
		t.Fatalf("acknowledged as handled with its run again owed: %+v", h.obs.all())
	}
}

// switchDurable counts one failover on its first Durable call (a primary
// replaced while the handler ran, seen when Durable lists the primaries)
// and refuses while refuse is set (the cluster settling), or on that first
// call alone (refuseFirst).
type switchDurable struct {
	refuse      atomic.Bool
	refuseFirst bool
	calls       atomic.Int32
	failovers   atomic.Uint64
}

func (s *switchDurable) Durable(context.Context) error {
	n := s.calls.Add(1)
	if n == 1 {
		s.failovers.Add(1)
	}
	if s.refuse.Load() || s.refuseFirst && n == 1 {
		return fmt.Errorf("primary 10.0.0.1:6379: %w: connection refused", memory.ErrUnavailable)
	}
	return nil
}

func (s *switchDurable) Failovers() uint64 { return s.failovers.Load() }

// A failover the store counts while the handled event waits for its
// writes' durability (Durable lists the primaries) calls for a run again
// that is owed at once: a worker stopped during that wait hands the event
// back, and the next worker runs the handler again instead of
// acknowledging it as a duplicate. (Found by review: the run again was
// recorded only once Durable succeeded.)
func TestRunAgainOwedWhenStoppedWaitingForDurability(t *testing.T) {
	h := newHarness(t, func(c *events.ConsumerConfig) { c.MaxDeliver = 5 })
	cfg := h.config()
	cfg.WaitMax = 20 * time.Millisecond
	procs := newMemProcessed()
	d1 := &switchDurable{}
	d1.refuse.Store(true)
	var first atomic.Int32
	r1, err := runner.New(h.js, cfg, func(context.Context, events.Envelope) error {
		first.Add(1)
		return nil
	}, runner.WithLogger(zaptest.NewLogger(t)), runner.WithObserver(h.obs), runner.WithProcessed(procs), runner.WithDurable(d1))
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.publish(1)
	eventually(t, "undurable", func() bool { return h.obs.count(runner.ResultUndurable) >= 2 })
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = r1.Stop(sctx)
	cancel()
	if first.Load() != 1 || d1.Failovers() != 1 {
		t.Fatalf("setup: handled %d, failovers %d", first.Load(), d1.Failovers())
	}

	nextWorkerRunsItAgain(t, h, cfg, procs)
}

// The same without a stop: the durability wait runs past MaxWait, the
// event goes back to the stream and comes back as a new delivery, which
// runs the run again it is owed.
func TestRunAgainOwedPastMaxWait(t *testing.T) {
	h := newHarness(t, func(c *events.ConsumerConfig) { c.MaxDeliver = 5 })
	cfg := h.config()
	cfg.WaitMax = 20 * time.Millisecond
	cfg.MaxWait = 150 * time.Millisecond
	cfg.UnavailableDelay = 300 * time.Millisecond
	d := &switchDurable{}
	d.refuse.Store(true)
	var handled atomic.Int32
	h.start(cfg, func(context.Context, events.Envelope) error {
		handled.Add(1)
		return nil
	}, runner.WithProcessed(newMemProcessed()), runner.WithDurable(d))
	h.publish(1)
	// past MaxWait the delivery is nak'ed (UnavailableDelay); the cluster
	// settles before it comes back
	time.Sleep(300 * time.Millisecond)
	d.refuse.Store(false)
	eventually(t, "acked", func() bool { return h.consumer().AckFloor.Stream == 1 })
	if n := handled.Load(); n != 2 {
		t.Fatalf("a failover was counted after the handler began: handled %d times, want 2 (duplicates %d)", n, h.obs.count(runner.ResultDuplicate))
	}
}

// The run again owed for a failover seen during the durability wait is
// adopted from the records (owedRedo); a failover during that run again
// calls for a second one, recorded as owed before it runs. (Found by
// review: the first wait's note was kept and the second went unrecorded.)
func TestSecondRunAgainRecordedOwed(t *testing.T) {
	h := newHarness(t, func(c *events.ConsumerConfig) { c.MaxDeliver = 5 })
	cfg := h.config()
	cfg.WaitMax = 20 * time.Millisecond
	procs := newMemProcessed()
	d := &switchDurable{refuseFirst: true}
	var runs atomic.Int32
	h.start(cfg, func(context.Context, events.Envelope) error {
		if runs.Add(1) == 2 {
			d.failovers.Add(1) // a failover during the first run again
		}
		return nil
	}, runner.WithProcessed(procs), runner.WithDurable(d))
	evs := h.publish(1)
	eventually(t, "acked", func() bool { return h.consumer().AckFloor.Stream == 1 })
	owed2, _ := procs.EventProcessed(context.Background(), memory.ProjectRef{Project: "proj"}, cfg.Consumer+"/redo", evs[0].ID+"#2")
	done2, _ := procs.EventProcessed(context.Background(), memory.ProjectRef{Project: "proj"}, cfg.Consumer+"/redone", evs[0].ID+"#2")
	if runs.Load() != 3 || !owed2 || !done2 {
		t.Fatalf("the second run again (run %d) was not recorded as owed before it ran (owed %v): a stop during it hands back an event whose records owe only the first", runs.Load(), owed2)
	}
}
