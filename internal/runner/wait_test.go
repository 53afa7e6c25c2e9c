package runner_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
)

var errBehind = errors.New("the session's transcript is behind")

// The chaos suite's compactor: a tokens_reported that waits for the
// extractor (transcript behind) or for another run (session busy) was
// nak'ed with the failure backoff, silently, up to 256 s apart, each wait
// spending a delivery: 13 events sat ack-pending for minutes and one more
// wait would have sent a valid event to the dead-letter stream. A Wait now
// keeps the message (its handler slot free for others), calls the handler
// again after a short delay, and spends no delivery.
func TestWaitSpendsNoDelivery(t *testing.T) {
	h := newHarness(t, func(c *events.ConsumerConfig) { c.MaxDeliver = 2 })
	var mu sync.Mutex
	calls := map[string]int{}
	cfg := h.config()
	cfg.WaitMax = 50 * time.Millisecond
	r := h.start(cfg, func(_ context.Context, ev events.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		calls[ev.TurnID]++
		if ev.TurnID == "t0" && calls["t0"] <= 5 { // waits five times: more than the limit of deliveries
			return runner.Wait(errBehind)
		}
		return nil
	})
	h.publish(3)
	eventually(t, "all acked", func() bool { return h.consumer().AckFloor.Stream == 3 })
	mu.Lock()
	if calls["t0"] != 6 || calls["t1"] != 1 || calls["t2"] != 1 {
		t.Fatalf("calls %v", calls)
	}
	mu.Unlock()
	waits := 0
	for _, o := range h.obs.all() {
		if o.Delivery != 1 {
			t.Fatalf("a wait spent a delivery: %+v", o)
		}
		if o.Result == runner.ResultWaiting {
			waits++
		}
	}
	if waits != 5 || len(h.letters()) != 0 || r.Status().Waiting != 0 {
		t.Fatalf("%d waits, %d letters, status %+v", waits, len(h.letters()), r.Status())
	}
	if ci := h.consumer(); ci.NumRedelivered != 0 {
		t.Fatalf("redelivered %d", ci.NumRedelivered)
	}
}

// A wait past MaxWait is a transient failure: nak'ed, counted, and at the
// delivery limit dead-lettered with its reason.
func TestWaitPastMaxWaitIsAFailure(t *testing.T) {
	h := newHarness(t, func(c *events.ConsumerConfig) { c.MaxDeliver = 2 })
	cfg := h.config()
	cfg.WaitMax = 20 * time.Millisecond
	cfg.MaxWait = 100 * time.Millisecond
	h.start(cfg, func(context.Context, events.Envelope) error { return runner.Wait(errBehind) })
	h.publish(1)
	eventually(t, "a letter", func() bool { return len(h.letters()) == 1 })
	if l := h.letters()[0]; l.Deliveries != 2 {
		t.Fatalf("letter %+v", l)
	}
	if h.obs.count(runner.ResultWaiting) == 0 || h.obs.count(runner.ResultRetried) != 1 {
		t.Fatalf("outcomes %+v", h.obs.all())
	}
}

// A delivery that waits longer than the consumer's ack wait is kept alive
// (InProgress) while it waits: the server does not deliver it again, and
// the wait spends no delivery. The wait used to reset the time the keeper
// measures keep-alives from without sending one, so with waits shorter
// than a third of the ack wait (the compactor: at most 15 s apart, ack
// wait a minute) no InProgress was ever sent and the server redelivered
// the waiting event after its ack wait: a second copy, a delivery spent.
func TestLongWaitIsKeptAlive(t *testing.T) {
	const ackWait = 3 * time.Second
	h := newHarness(t, func(c *events.ConsumerConfig) { c.AckWait = ackWait })
	cfg := h.config()
	cfg.WaitMax = 300 * time.Millisecond // well under a third of the ack wait
	var mu sync.Mutex
	var first time.Time
	calls := 0
	h.start(cfg, func(_ context.Context, ev events.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if first.IsZero() {
			first = time.Now()
		}
		if time.Since(first) < 2*ackWait+ackWait/2 {
			return runner.Wait(errBehind)
		}
		return nil
	})
	h.publish(1)
	eventually(t, "acked", func() bool { return h.obs.count(runner.ResultAcked) >= 1 })
	for _, o := range h.obs.all() {
		if o.Delivery != 1 {
			t.Fatalf("the server delivered the waiting event again (no InProgress while it waited): %+v", o)
		}
	}
	if ci := h.consumer(); ci.NumRedelivered != 0 || ci.NumAckPending != 0 {
		t.Fatalf("redelivered %d, ack pending %d", ci.NumRedelivered, ci.NumAckPending)
	}
	mu.Lock()
	defer mu.Unlock()
	if w := h.obs.count(runner.ResultWaiting); w < 5 || w != calls-1 {
		t.Fatalf("%d waits in %d calls", w, calls)
	}
}
