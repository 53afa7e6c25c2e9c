package runner_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
)

// injectorConfig is the injector consumer's runner config with fast test
// timings, one handler at a time.
func (h *harness) injectorConfig() runner.Config {
	c := h.config()
	c.Consumer = events.ConsumerInjector
	c.MaxDeliver = 3
	c.Concurrency = 1
	return c
}

func (h *harness) turn(tenant, session, turn string, replyBy time.Time) {
	h.t.Helper()
	if _, err := h.client.PublishTurnStarted(context.Background(),
		events.Ref{TenantID: tenant, ProjectID: "p", SessionID: session, TurnID: turn},
		events.TurnStarted{Text: "hi", ReplyBy: replyBy}); err != nil {
		h.t.Fatal(err)
	}
}

func replyBy(ev events.Envelope) time.Time {
	if ts, ok := ev.Payload.(events.TurnStarted); ok {
		return ts.ReplyBy
	}
	return time.Time{}
}

// The flood: one tenant's sessions (50 here, 4 turns each) fill
// the injector's stream ahead of another tenant's turn. With fairness the
// runner holds what the consumer lets it (max ack pending) and serves the
// other tenant's turn within one round, and the flood's sessions in turn;
// first in, first out (the runner before), that turn came after the whole
// flood. Deterministic: the handler holds its first event until everything
// is pulled.
func TestFairnessServesAnotherTenantBeforeTheFlood(t *testing.T) {
	const sessions, perSession = 50, 4
	for _, fair := range []bool{true, false} {
		t.Run(fmt.Sprintf("fair=%v", fair), func(t *testing.T) {
			h := newHarness(t, nil)
			release := make(chan struct{})
			var opts []runner.Option
			if fair {
				opts = append(opts, runner.WithFairness(0))
			}
			h.turn("flood", "s0", "t0", time.Time{}) // taken at once; its handler waits
			rec := holdFirst(release)
			r := h.start(h.injectorConfig(), rec.handle, opts...)
			eventually(t, "the first turn in its handler", func() bool { return r.Status().InFlight == 1 })
			for i := range sessions * perSession {
				h.turn("flood", fmt.Sprintf("s%d", i%sessions), fmt.Sprintf("t%d", i/sessions+1), time.Time{})
			}
			h.turn("victim", "v", "t1", time.Time{})
			if fair {
				eventually(t, "everything pulled", func() bool { return r.Status().Queued == sessions*perSession+1 })
			}
			close(release)
			eventually(t, "everything handled", func() bool { return len(rec.handled()) == sessions*perSession+2 })
			order := rec.handled()
			pos := -1
			for i, ev := range order {
				if ev.TenantID == "victim" {
					pos = i
				}
			}
			t.Logf("the other tenant's turn was handled %d of %d", pos+1, len(order))
			if !fair {
				if pos != len(order)-1 {
					t.Fatalf("first in, first out: the victim is %d of %d", pos+1, len(order))
				}
				return
			}
			if pos > 2 {
				t.Fatalf("the other tenant's turn was handled %d of %d: behind the flood", pos+1, len(order))
			}
			// The flood's sessions in turn: its first 50 turns after the
			// one held are one per session.
			seen := map[string]bool{}
			for _, ev := range order[1:] {
				if ev.TenantID == "flood" && len(seen) < sessions {
					if seen[ev.SessionID] {
						t.Fatalf("session %s served twice before every session was served once", ev.SessionID)
					}
					seen[ev.SessionID] = true
				}
			}
		})
	}
}

// Turns past their reply deadline cost almost nothing: acknowledged at
// intake without a handler call (ResultExpired, reported to the hook), and
// a turn that expires while it waits its turn is dropped by the keeper
// even while every handler is busy. A redelivery goes to the handler even
// when late (an earlier delivery may have answered it), and so does a turn
// stored before the runner started: a server that restarted may have lost
// the record of its earlier deliveries.
func TestExpiredTurnsAreDroppedBeforeAnyWork(t *testing.T) {
	h := newHarnessTopology(t, func(topo *events.Topology) {
		for i := range topo.Consumers {
			if topo.Consumers[i].Name == events.ConsumerInjector {
				topo.Consumers[i].AckWait = time.Second // the unacked delivery comes back soon
			}
		}
	})
	past := func() time.Time { return time.Now().Add(-time.Second) }
	// One delivered once and not acked (a worker that died): late now.
	h.turn("a", "redelivered", "t1", past())
	cons, err := h.js.Consumer(context.Background(), events.StreamIn, events.ConsumerInjector)
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 1; {
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for range b.Messages() {
			got++
		}
	}
	h.turn("a", "before-start", "t1", past()) // stored before the runner started
	release := make(chan struct{})
	var mu sync.Mutex
	var handled []string
	var expired atomic.Int32
	cfg := h.injectorConfig()
	cfg.BackoffBase = 10 * time.Millisecond
	cfg.ServerClockSkew = time.Millisecond // one clock: the test server's
	r := h.start(cfg, func(ctx context.Context, ev events.Envelope) error {
		mu.Lock()
		handled = append(handled, ev.SessionID)
		mu.Unlock()
		if ev.SessionID == "busy" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}, runner.WithFairness(0), runner.WithDeadline(replyBy, func(events.Envelope) { expired.Add(1) }))
	time.Sleep(5 * time.Millisecond)
	h.turn("b", "busy", "t1", time.Time{}) // no deadline: its handler waits
	eventually(t, "the busy turn in its handler", func() bool { return r.Status().InFlight == 1 })
	for i := range 100 {
		h.turn("a", fmt.Sprintf("late%d", i), "t1", past())
	}
	// Waits behind the busy handler and passes its deadline meanwhile.
	h.turn("c", "soon", "t1", time.Now().Add(300*time.Millisecond))
	eventually(t, "101 expired", func() bool { return expired.Load() == 101 })
	if n := h.obs.count(runner.ResultExpired); n != 101 {
		t.Fatalf("%d expired outcomes", n)
	}
	close(release)
	eventually(t, "all settled", func() bool { return h.consumerOf(events.ConsumerInjector).AckFloor.Stream == 104 })
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != 3 || !contains(handled, "busy") || !contains(handled, "redelivered") || !contains(handled, "before-start") {
		t.Fatalf("handled %v: only the busy turn, the late redelivery and the turn stored before the start should reach the handler", handled)
	}
}

// A turn whose handler said Wait (the injector's recorded turn waiting to
// publish its answer) and that passes its deadline while it waits is
// handed back to the handler, not dropped as expired: its handler ran, so
// work was done for it. Fairness and a deadline, as the injector runs.
func TestWaitedTurnPastItsDeadlineIsHandledAgain(t *testing.T) {
	h := newHarness(t, nil)
	var calls, expired atomic.Int32
	release, entered := make(chan struct{}), make(chan struct{})
	cfg := h.injectorConfig() // one handler
	// The wait outlasts the deadline.
	cfg.BackoffBase, cfg.BackoffMax, cfg.WaitMax = 400*time.Millisecond, 400*time.Millisecond, 400*time.Millisecond
	cfg.ServerClockSkew = time.Millisecond
	h.start(cfg, func(ctx context.Context, ev events.Envelope) error {
		if ev.SessionID == "busy" {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}
		if calls.Add(1) == 1 {
			return runner.Wait(errors.New("the bus cannot take the answer yet"))
		}
		return nil
	}, runner.WithFairness(0), runner.WithDeadline(replyBy, func(events.Envelope) { expired.Add(1) }))
	time.Sleep(5 * time.Millisecond) // after the runner's epoch: a first delivery (firstDelivery)
	h.turn("a", "waits", "t1", time.Now().Add(150*time.Millisecond))
	eventually(t, "the first call", func() bool { return calls.Load() == 1 })
	// The one handler is busy when the wait is over: the waited turn
	// sits in the queue past its deadline.
	h.turn("b", "busy", "t1", time.Time{})
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the busy turn never reached its handler")
	}
	time.Sleep(time.Second)
	close(release)
	eventually(t, "both settled", func() bool { return h.consumerOf(events.ConsumerInjector).AckFloor.Stream == 2 })
	if n, e := calls.Load(), expired.Load(); n != 2 || e != 0 {
		t.Fatalf("handler called %d times, %d expired: want 2 calls (the wait, then its answer) and none expired", n, e)
	}
}

// A turn stored before the connection reconnected (a restarted server may
// have lost its record of earlier deliveries) goes to the handler even when
// its delivery count says first and it is late; one stored after is
// dropped at intake.
func TestLateTurnFromBeforeAReconnectReachesTheHandler(t *testing.T) {
	h := newHarness(t, nil)
	release := make(chan struct{})
	var mu sync.Mutex
	var handled []string
	cfg := h.injectorConfig() // one handler, one message held: nothing else is pulled while it runs
	cfg.ServerClockSkew = time.Millisecond
	h.start(cfg, func(ctx context.Context, ev events.Envelope) error {
		mu.Lock()
		handled = append(handled, ev.SessionID)
		mu.Unlock()
		if ev.SessionID == "busy" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}, runner.WithDeadline(replyBy, nil))
	time.Sleep(5 * time.Millisecond)
	h.turn("b", "busy", "t1", time.Time{})
	eventually(t, "the busy turn in its handler", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == 1
	})
	h.turn("a", "stored-before", "t1", time.Now().Add(-time.Second))
	before := h.nc.Stats().Reconnects
	if err := h.nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "reconnected", func() bool { return h.nc.Stats().Reconnects > before && h.nc.IsConnected() })
	time.Sleep(300 * time.Millisecond) // the runner's keeper notices within 50 ms
	h.turn("a", "stored-after", "t1", time.Now().Add(-time.Second))
	close(release)
	eventually(t, "all settled", func() bool { return h.consumerOf(events.ConsumerInjector).AckFloor.Stream == 3 })
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != 2 || handled[1] != "stored-before" {
		t.Fatalf("handled %v, want busy then stored-before (stored-after dropped as late)", handled)
	}
	if h.obs.count(runner.ResultExpired) != 1 {
		t.Fatalf("outcomes %+v", h.obs.all())
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// holder records what its handler handles, holding the first event until
// release is closed (or the handler's context ends).
type holder struct {
	release <-chan struct{}
	first   atomic.Bool
	mu      sync.Mutex
	order   []events.Envelope
}

func holdFirst(release <-chan struct{}) *holder { return &holder{release: release} }

func (h *holder) handle(ctx context.Context, ev events.Envelope) error {
	if h.first.CompareAndSwap(false, true) {
		select {
		case <-h.release:
		case <-ctx.Done():
		}
	}
	h.mu.Lock()
	h.order = append(h.order, ev)
	h.mu.Unlock()
	return nil
}

// handled is what was handled so far, in order.
func (h *holder) handled() []events.Envelope {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.order)
}
