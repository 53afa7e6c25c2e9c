package runner_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// Events held in a consumer's ack-pending set are never silent: the issue
// saw 13 compactor events ack-pending and redelivered for minutes with no
// log line. A handled event delivered again past the limit is logged and
// acked with the server's confirmation; a transient failure that keeps
// coming back is logged with its delivery, limit and delay.
func TestRedeliveriesAreLogged(t *testing.T) {
	h := newHarness(t, func(c *events.ConsumerConfig) { c.MaxDeliver = 1; c.AckWait = time.Second })
	core, logs := observer.New(zap.DebugLevel)
	ev := h.publish(1)[0]
	cons, err := h.js.Consumer(context.Background(), events.StreamIn, events.ConsumerExtractor)
	if err != nil {
		t.Fatal(err)
	}
	// A worker handled it and died before its ack took.
	for got := 0; got < 1; {
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for range b.Messages() {
			got++
		}
	}
	p := newMemProcessed()
	if err := p.MarkEventProcessed(context.Background(), memory.ProjectRef{Project: ev.ProjectID}, events.ConsumerExtractor, ev.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	cfg := h.config()
	h.start(cfg, func(context.Context, events.Envelope) error { return errors.New("store timeout") },
		runner.WithProcessed(p), runner.WithLogger(zap.New(core)))
	eventually(t, "acked", func() bool { return h.consumer().AckFloor.Stream == 1 })
	if n := logs.FilterMessageSnippet("past the delivery limit").Len(); n != 1 {
		t.Fatalf("%d log lines for a handled event past the limit", n)
	}
	if n := logs.FilterMessageSnippet("did not confirm").Len(); n != 0 {
		t.Fatal("a confirmed ack was logged as unconfirmed")
	}

	// A transient failure: logged at warn from its third delivery on.
	cfg.MaxDeliver = 5
	h2 := newHarness(t, func(c *events.ConsumerConfig) { c.MaxDeliver = 5 })
	core2, logs2 := observer.New(zap.DebugLevel)
	cfg2 := h2.config()
	h2.start(cfg2, func(context.Context, events.Envelope) error { return errors.New("store timeout") },
		runner.WithLogger(zap.New(core2)))
	h2.publish(1)
	eventually(t, "the third delivery retried", func() bool {
		for _, o := range h2.obs.all() {
			if o.Delivery >= 3 && o.Result == runner.ResultRetried {
				return true
			}
		}
		return false
	})
	warn := logs2.FilterMessage("event retried").FilterLevelExact(zap.WarnLevel).All()
	debug := logs2.FilterMessage("event retried").FilterLevelExact(zap.DebugLevel).All()
	if len(warn) == 0 || len(debug) != 2 {
		t.Fatalf("retries logged: %d warn, %d debug", len(warn), len(debug))
	}
	f := warn[0].ContextMap()
	if f["delivery"] != uint64(3) || f["limit"] != int64(5) || f["error"] != "store timeout" {
		t.Fatalf("fields %v", f)
	}
}
