package runner_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/internal/runner/dlq"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
)

// The finding: with ENGRAM_DLQ at its limit, 256 poison events held
// the injector's max-ack-pending (then 256) and 0 of 96 valid turns were
// answered. With parking, a refused letter is parked in the store (a real
// SQLite store) and its event terminated: every valid turn is handled, no
// letter is lost, and once the DLQ has room every letter moves there.
func TestFullDLQValidEventsKeepFlowing(t *testing.T) {
	const poison, valid = 256, 96
	h := newHarnessTopology(t, func(topo *events.Topology) {
		topo.DLQ.MaxBytes = 4 << 10
		for i := range topo.Consumers {
			if topo.Consumers[i].Name == events.ConsumerInjector {
				topo.Consumers[i].MaxAckPending = poison // what the issue ran with
			}
		}
	})
	if c, _ := h.topo.Consumer(events.ConsumerInjector); c.MaxAckPending != poison {
		t.Fatalf("the injector's max ack pending is %d: the test wants the poison to fill it", c.MaxAckPending)
	}
	ctx := context.Background()
	fillDLQ(t, h)

	st := storetest.OpenSQLite(t)
	parking := dlq.NewParking(dlq.NewWriter(h.js, h.topo.Subjects()), st, dlq.ParkingOptions{Interval: 100 * time.Millisecond})

	for i := range poison {
		m := nats.NewMsg(h.topo.Subjects().In(events.TypeTurnStarted, "", "p", fmt.Sprintf("poison%d", i)))
		m.Data = []byte(fmt.Sprintf(`{"not":"an event %d"}`, i))
		if _, err := h.js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range valid {
		if _, err := h.client.PublishTurnStarted(ctx, events.Ref{ProjectID: "p", SessionID: fmt.Sprintf("ok%d", i), TurnID: "t1"},
			events.TurnStarted{Text: "hello"}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := h.config()
	cfg.Consumer = events.ConsumerInjector
	cfg.MaxDeliver = 3
	cfg.Concurrency = 4
	var handled atomic.Int32
	h.start(cfg, func(context.Context, events.Envelope) error { handled.Add(1); return nil }, runner.WithParking(parking))

	eventually(t, "every valid turn handled", func() bool { return handled.Load() == valid })
	n, err := st.CountParkedLetters(ctx)
	if err != nil || n != poison {
		t.Fatalf("%d letters parked (%v), want %d", n, err, poison)
	}
	if ps := parking.Status(); ps.Refused == nil || ps.Waiting != poison {
		t.Fatalf("parking status %+v", ps)
	} else if msg, failed := ps.Problem(); failed || msg == "" {
		t.Fatalf("problem %q failed %v", msg, failed)
	}
	parked := 0
	for _, o := range h.obs.all() {
		if o.Parked {
			parked++
			if o.Result != runner.ResultDeadLettered {
				t.Fatalf("parked outcome %+v", o)
			}
		}
	}
	if parked != poison {
		t.Fatalf("%d outcomes parked, want %d", parked, poison)
	}
	// Every event is done on the consumer: nothing holds a slot.
	eventually(t, "all terminated or acked", func() bool {
		ci := h.consumerOf(events.ConsumerInjector)
		return ci.AckFloor.Stream == poison+valid && ci.NumAckPending == 0
	})

	// The operator makes room: the mover stores every letter, then the shelf is empty.
	parking.Start(func(err error) { t.Logf("mover: %v", err) })
	t.Cleanup(parking.Stop)
	growDLQ(t, h, 1<<20)
	eventually(t, "every letter in the DLQ", func() bool {
		n, err := st.CountParkedLetters(ctx)
		return err == nil && n == 0
	})
	seen := map[uint64]bool{}
	for _, l := range h.letters() {
		if l.Consumer == events.ConsumerInjector {
			seen[l.Sequence] = true
		}
	}
	if len(seen) != poison {
		t.Fatalf("%d distinct letters of the injector in the DLQ, want %d", len(seen), poison)
	}
	for seq := uint64(1); seq <= poison; seq++ {
		if !seen[seq] {
			t.Fatalf("no letter for stream sequence %d", seq)
		}
	}
	if ps := parking.Status(); ps.Refused != nil || ps.Waiting != 0 || ps.Moved != poison {
		t.Fatalf("after the move: %+v", ps)
	} else if msg, _ := ps.Problem(); msg != "" {
		t.Fatalf("problem after the move: %q", msg)
	}
}

// fillDLQ publishes letters until ENGRAM_DLQ refuses one.
func fillDLQ(t *testing.T, h *harness) {
	t.Helper()
	for i := 0; ; i++ {
		m := nats.NewMsg(h.topo.Subjects().DLQ("filler"))
		m.Data = make([]byte, 512)
		if _, err := h.js.PublishMsg(context.Background(), m); err != nil {
			t.Logf("DLQ full after %d letters: %v", i, err)
			return
		}
		if i > 1000 {
			t.Fatal("the DLQ never filled")
		}
	}
}

// growDLQ raises ENGRAM_DLQ's max bytes.
func growDLQ(t *testing.T, h *harness, max int64) {
	t.Helper()
	st, err := h.js.Stream(context.Background(), events.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxBytes = max
	if _, err := h.js.UpdateStream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) consumerOf(name string) *jetstream.ConsumerInfo {
	h.t.Helper()
	c, err := h.js.Consumer(context.Background(), events.StreamIn, name)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return info
}

// failingShelf parks letters in a real store, and the first one it parks is
// lost with a failover (the primary answered, then was replaced by a
// replica without it): the store's Durable succeeds afterwards, on the
// primaries serving then.
type failingShelf struct {
	dlq.Shelf
	d     *switchDurable
	first atomic.Bool
}

func (s *failingShelf) ParkLetter(ctx context.Context, key string, data []byte) error {
	if s.first.CompareAndSwap(false, true) {
		s.d.failovers.Add(1)
		return nil // answered, then lost
	}
	return s.Shelf.ParkLetter(ctx, key, data)
}

// A letter parked while the store failed over is not taken as parked: its
// event is not terminated, and it is parked again when delivered again.
func TestLetterParkedDuringAFailoverIsParkedAgain(t *testing.T) {
	h := newHarnessTopology(t, func(topo *events.Topology) { topo.DLQ.MaxBytes = 4 << 10 })
	ctx := context.Background()
	fillDLQ(t, h)
	st := storetest.OpenSQLite(t)
	d := &switchDurable{}
	d.calls.Store(1) // its failovers are the shelf's alone
	shelf := &failingShelf{Shelf: st, d: d}
	parking := dlq.NewParking(dlq.NewWriter(h.js, h.topo.Subjects()), shelf, dlq.ParkingOptions{Interval: 100 * time.Millisecond})
	m := nats.NewMsg(h.topo.Subjects().In(events.TypeTurnStarted, "", "p", "poison"))
	m.Data = []byte(`{"not":"an event"}`)
	if _, err := h.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	cfg := h.config()
	cfg.Consumer = events.ConsumerInjector
	cfg.MaxDeliver = 3
	h.start(cfg, func(context.Context, events.Envelope) error { return nil }, runner.WithParking(parking), runner.WithDurable(d))
	eventually(t, "the letter parked", func() bool {
		n, err := st.CountParkedLetters(ctx)
		return err == nil && n == 1
	})
	eventually(t, "the event terminated", func() bool { return h.consumerOf(events.ConsumerInjector).AckFloor.Stream == 1 })
	if !shelf.first.Load() || d.failovers.Load() != 1 {
		t.Fatal("the first letter was not lost: the test lost nothing")
	}
	var failed int
	for _, o := range h.obs.all() {
		if o.DeadLetterFailed {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d dead-letterings failed, want 1 (the letter lost with the failover): %+v", failed, h.obs.all())
	}
}
