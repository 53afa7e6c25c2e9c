package runner_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// A full DLQ (the ENGRAM_DLQ_MAX_BYTES=2M, scaled down): invalid
// events whose letters do not fit stay in ENGRAM_IN, nak'ed with backoff and
// counted, past the consumer's max deliveries; once the DLQ has room every
// letter arrives. None is lost.
func TestFullDLQRetriesAndLosesNoLetter(t *testing.T) {
	const n = 30
	h := newHarnessTopology(t, func(topo *events.Topology) {
		topo.DLQ.MaxBytes = 8 << 10 // a few letters of 1 KiB
		for i := range topo.Consumers {
			if topo.Consumers[i].Name == events.ConsumerExtractor {
				topo.Consumers[i].MaxDeliver = 3
			}
		}
	})
	var calls atomic.Int32
	h.start(h.config(), func(context.Context, events.Envelope) error { calls.Add(1); return nil })
	body := bytes.Repeat([]byte("x"), 1000)
	for i := range n {
		m := nats.NewMsg(fmt.Sprintf("engram.in.turn_ended.%%.p.s%d", i))
		m.Data = append([]byte(fmt.Sprintf("not json %d ", i)), body...)
		m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("bad-%d", i))
		if _, err := h.js.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	failed := func() int {
		k := 0
		for _, o := range h.obs.all() {
			if o.DeadLetterFailed {
				if o.Result != runner.ResultRetried || o.Delay <= 0 {
					t.Errorf("failed letter not retried with a delay: %+v", o)
				}
				k++
			}
		}
		return k
	}
	// Well past max deliveries (3) for the refused ones.
	eventually(t, "letters refused on their 5th delivery", func() bool {
		for _, o := range h.obs.all() {
			if o.DeadLetterFailed && o.Delivery >= 5 {
				return true
			}
		}
		return false
	})
	stored := len(h.letters())
	if stored == 0 || stored >= n {
		t.Fatalf("%d letters stored with a full DLQ", stored)
	}
	// Nothing left the consumer without a letter: the rest is still pending.
	info := h.consumer()
	if int(info.AckFloor.Stream) >= n || info.NumAckPending+int(info.NumPending) == 0 {
		t.Fatalf("consumer gave messages up: %+v", info)
	}
	// The operator makes room (or the alert on engram_dlq_write_failures_total does).
	st, err := h.js.Stream(context.Background(), events.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxBytes = 1 << 20
	if _, err := h.js.UpdateStream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every letter", func() bool { return len(h.letters()) == n })
	eventually(t, "all terminated", func() bool { return h.consumer().AckFloor.Stream == n })
	seen := map[uint64]bool{}
	for _, l := range h.letters() {
		seen[l.Sequence] = true
		if l.Truncated != 0 || !bytes.HasPrefix(l.Data, []byte("not json")) {
			t.Fatalf("letter %d: truncated %d body %.20q", l.Sequence, l.Truncated, l.Data)
		}
	}
	if len(seen) != n || calls.Load() != 0 || failed() == 0 {
		t.Fatalf("distinct %d calls %d failed %d", len(seen), calls.Load(), failed())
	}
	t.Logf("%d letters: %d stored at once, %d refused deliveries retried", n, stored, failed())
}

// The 1,048,400-byte invalid event: with the letter's headers it is
// over the server's maximum payload. The letter keeps the first bytes, says
// how big the event was, and where it was.
func TestOversizeLetterIsTruncatedNotLost(t *testing.T) {
	h := newHarnessTopology(t, func(topo *events.Topology) {
		// A deployment that allows events up to the server's payload.
		topo.MaxEventBytes = -1
	})
	h.start(h.config(), func(context.Context, events.Envelope) error { return nil })
	const size = 1_048_400
	if mp := h.nc.MaxPayload(); mp < size+100 || mp >= size+4096 {
		t.Fatalf("max payload %d: the test wants an event just under it", mp)
	}
	body := bytes.Repeat([]byte("z"), size)
	copy(body, "{not an event")
	m := nats.NewMsg("engram.in.turn_ended.%.p.s")
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, "big-1")
	if _, err := h.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	eventually(t, "letter", func() bool { return len(h.letters()) == 1 })
	l := h.letters()[0]
	if l.Truncated != size || len(l.Data) == 0 || len(l.Data) >= size || !bytes.Equal(l.Data, body[:len(l.Data)]) {
		t.Fatalf("truncated %d, kept %d bytes", l.Truncated, len(l.Data))
	}
	if l.Stream != events.StreamIn || l.Sequence != 1 || l.MsgID != "big-1" || l.Subject != "engram.in.turn_ended.%.p.s" {
		t.Fatalf("letter %+v", l)
	}
	t.Logf("letter of a %d-byte event keeps %d bytes (max payload %d)", size, len(l.Data), h.nc.MaxPayload())
	eventually(t, "terminated", func() bool { return h.consumer().AckFloor.Stream == 1 })
	if h.obs.count(runner.ResultDeadLettered) != 1 {
		t.Fatalf("outcomes %+v", h.obs.all())
	}
}

// A message delivered more than max deliveries times without a result (the
// worker died holding it) is dead-lettered by the runner, letter first.
func TestDeliveriesWithoutResultDeadLetter(t *testing.T) {
	h := newHarness(t, func(c *events.ConsumerConfig) { c.MaxDeliver = 2; c.AckWait = time.Second })
	ev := h.publish(1)[0]
	cons, err := h.js.Consumer(context.Background(), events.StreamIn, events.ConsumerExtractor)
	if err != nil {
		t.Fatal(err)
	}
	// Two workers that die holding it: nobody acks.
	for got := 0; got < 2; {
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for range b.Messages() {
			got++
		}
	}
	var calls atomic.Int32
	h.start(h.config(), func(context.Context, events.Envelope) error { calls.Add(1); return nil })
	eventually(t, "letter", func() bool { return len(h.letters()) == 1 })
	l := h.letters()[0]
	if l.MsgID != ev.ID || l.Deliveries != 3 || calls.Load() != 0 {
		t.Fatalf("letter %+v calls %d", l, calls.Load())
	}
	eventually(t, "terminated", func() bool { return h.consumer().AckFloor.Stream == 1 })
}

// An event already processed whose ack was lost is acked as a duplicate
// even past max deliveries, not dead-lettered.
func TestProcessedPastMaxDeliveriesIsAcked(t *testing.T) {
	h := newHarness(t, func(c *events.ConsumerConfig) { c.MaxDeliver = 1; c.AckWait = time.Second })
	ev := h.publish(1)[0]
	cons, err := h.js.Consumer(context.Background(), events.StreamIn, events.ConsumerExtractor)
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
	p := newMemProcessed()
	if err := p.MarkEventProcessed(context.Background(), memory.ProjectRef{Project: ev.ProjectID}, events.ConsumerExtractor, ev.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	h.start(h.config(), func(context.Context, events.Envelope) error { return nil }, runner.WithProcessed(p))
	// The outcome is reported after the ack: a check right after the ack
	// floor moved found none (seen once in CI's run).
	eventually(t, "acked and reported", func() bool {
		return h.consumer().AckFloor.Stream == 1 && h.obs.count(runner.ResultDuplicate) == 1
	})
	if len(h.obs.all()) != 1 || len(h.letters()) != 0 {
		t.Fatalf("outcomes %+v letters %d", h.obs.all(), len(h.letters()))
	}
}
