package runner_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
)

// The flood beyond what the runner may hold: a tenant's backlog larger than
// the injector consumer's window (32 here; 16,384 in production, where the
// flood outruns the pull) sits in the stream in front of another tenant's
// turn. With lanes the other tenant's turn is pulled from its own lane and
// served in the first round; without, after the backlog that came before
// it. Every event is handled once either way, and the stream empties (the
// injector consumer acknowledges what a lane delivers, ResultLaned).
// Deterministic: the handler holds the first flood turn until everything
// the runner can hold is queued.
func TestLanesServeAnotherTenantBehindABacklog(t *testing.T) {
	const flood = 600
	for _, lanes := range []bool{true, false} {
		t.Run(fmt.Sprintf("lanes=%v", lanes), func(t *testing.T) {
			h := newHarnessTopology(t, func(topo *events.Topology) {
				for i := range topo.Consumers {
					if topo.Consumers[i].Name == events.ConsumerInjector {
						topo.Consumers[i].MaxAckPending = 32
					}
				}
				if lanes {
					topo.Lanes = []string{"flood", "victim"}
				}
			})
			release := make(chan struct{})
			opts := []runner.Option{runner.WithFairness(0)}
			if lanes {
				opts = append(opts, runner.WithLanes(events.LaneNames(), 50*time.Millisecond))
			}
			rec := holdFirst(release)
			r := h.start(h.injectorConfig(), rec.handle, opts...)
			h.turn("flood", "s0", "t0", time.Time{})
			eventually(t, "the first turn in its handler", func() bool { return r.Status().InFlight == 1 })
			for i := range flood {
				h.turn("flood", fmt.Sprintf("s%d", i%50), fmt.Sprintf("t%d", i/50+1), time.Time{})
			}
			h.turn("victim", "v", "t1", time.Time{})
			held := 31 // the window, less the turn in its handler
			if lanes {
				held = flood + 1 // the flood's lane holds it all, the victim's lane the victim
			}
			eventually(t, "the runner holding what it may", func() bool { return r.Status().Queued == held })
			close(release)
			eventually(t, "every turn handled", func() bool { return len(rec.handled()) >= flood+2 })
			order := rec.handled()
			pos := slices.IndexFunc(order, func(ev events.Envelope) bool { return ev.TenantID == "victim" })
			ids := map[string]int{}
			for _, ev := range order {
				ids[ev.ID]++
			}
			n := len(order)
			for id, c := range ids {
				if c != 1 {
					t.Errorf("event %s handled %d times", id, c)
				}
			}
			if n != flood+2 {
				t.Errorf("%d handled, want %d", n, flood+2)
			}
			if lanes && pos > 2 {
				t.Errorf("the other tenant's turn was handled %dth: behind the flood despite its lane", pos+1)
			}
			if !lanes && pos < flood/2 {
				t.Errorf("without lanes the other tenant's turn was handled %dth: the test does not show the backlog", pos+1)
			}
			if lanes {
				eventually(t, "the injector consumer acknowledging the laned turns", func() bool {
					return h.obs.count(runner.ResultLaned) == flood+2
				})
			}
			h.streamEmpties()
		})
	}
}

// A tenant given a lane while its turns flow (setup after `engram tenant
// add`): every turn is handled, none falls between the injector consumer
// and the new lane, and the stream empties. Turns stored before the
// runner saw the lane may be handled twice (the injector's answer is
// idempotent), never not at all.
func TestLaneAddedWhileTurnsFlowLosesNothing(t *testing.T) {
	h := newHarnessTopology(t, func(topo *events.Topology) { topo.Lanes = []string{"other"} })
	var mu sync.Mutex
	handled := map[string]int{}
	h.start(h.injectorConfig(), func(ctx context.Context, ev events.Envelope) error {
		mu.Lock()
		handled[ev.TurnID]++
		mu.Unlock()
		return nil
	}, runner.WithFairness(0), runner.WithLanes(events.LaneNames(), 20*time.Millisecond))
	const turns = 300
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range turns {
			h.turn("t1", "s", fmt.Sprintf("t%03d", i), time.Time{})
			if i%10 == 0 {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	time.Sleep(30 * time.Millisecond)
	topo := h.topo
	topo.Lanes = []string{"other", "t1"}
	if err := events.EnsureLanes(context.Background(), h.js, topo); err != nil {
		t.Fatal(err)
	}
	<-done
	eventually(t, "every turn handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == turns
	})
	h.streamEmpties()
	if n := h.obs.count(runner.ResultLaned); n == 0 {
		t.Error("no turn was left to the new lane: the test did not exercise it")
	}
}

// streamEmpties waits until ENGRAM_IN holds nothing: every consumer that
// receives an event acknowledged it (interest retention).
func (h *harness) streamEmpties() {
	h.t.Helper()
	st, err := h.js.Stream(context.Background(), events.StreamIn)
	if err != nil {
		h.t.Fatal(err)
	}
	eventually(h.t, "the stream empty (every consumer acknowledged)", func() bool {
		si, err := st.Info(context.Background())
		return err == nil && si.State.Msgs == 0
	})
}

// A lane deleted by hand (`nats consumer rm`) while its window is full, so
// that its loop is not waiting in a pull the server could answer "consumer
// deleted" (the next pull gets only "no responders"): the runner notices,
// and the tenant's later turns are the injector consumer's again, none
// acknowledged for a lane that is gone. (Turns stored between the delete
// and the runner's next look are lost with the lane, as is what it had not
// delivered.)
func TestLaneDeletedWhileBusyIsNoticed(t *testing.T) {
	h := newHarnessTopology(t, func(topo *events.Topology) { topo.Lanes = []string{"a", "b"} })
	ctx := context.Background()
	cc := h.topo.LaneConsumerConfig(events.LaneName(1), []string{"a"})
	cc.MaxAckPending = 2
	if _, err := h.js.CreateOrUpdateConsumer(ctx, events.StreamIn, cc); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	handled := map[string]int{}
	r := h.start(h.injectorConfig(), func(ctx context.Context, ev events.Envelope) error {
		once.Do(func() { <-release })
		mu.Lock()
		handled[ev.TurnID]++
		mu.Unlock()
		return nil
	}, runner.WithFairness(0), runner.WithLanes(events.LaneNames(), 20*time.Millisecond))
	time.Sleep(100 * time.Millisecond) // the lanes taken up
	h.turn("a", "s", "t0", time.Time{})
	h.turn("a", "s", "t1", time.Time{})
	eventually(t, "the lane's window full", func() bool { return r.Status().InFlight == 1 && r.Status().Queued == 1 })
	if err := h.js.DeleteConsumer(ctx, events.StreamIn, events.LaneName(1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // many looks of the runner
	close(release)
	for i := 2; i < 6; i++ {
		h.turn("a", "s", fmt.Sprintf("t%d", i), time.Time{})
	}
	eventually(t, "the turns after the lane went handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := 2; i < 6; i++ {
			if handled[fmt.Sprintf("t%d", i)] == 0 {
				return false
			}
		}
		return true
	})
}

// The lane cover is the subject's own tenant token: a turn whose token is
// an escape the encoder would not write (%61 for "a") matches no lane's
// literal filter, so the injector consumer keeps it (handles it, or
// dead-letters it as a subject it cannot vouch for) instead of
// acknowledging it for a lane that never delivers it.
func TestLaneCoverTakesTheTokenAsSent(t *testing.T) {
	h := newHarnessTopology(t, func(topo *events.Topology) { topo.Lanes = []string{"a"} })
	var mu sync.Mutex
	handled := map[string]int{}
	h.start(h.injectorConfig(), func(ctx context.Context, ev events.Envelope) error {
		mu.Lock()
		handled[ev.TenantID+"/"+ev.TurnID]++
		mu.Unlock()
		return nil
	}, runner.WithFairness(0), runner.WithLanes(events.LaneNames(), 20*time.Millisecond))
	time.Sleep(100 * time.Millisecond)
	ev := events.NewTurnStarted(events.Ref{TenantID: "a", ProjectID: "p", SessionID: "s", TurnID: "escaped"}, events.TurnStarted{Text: "hi"})
	raw, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	subject := strings.Replace(h.topo.Subjects().In(events.TypeTurnStarted, "a", "p", "s"), ".turn_started.a.", ".turn_started.%61.", 1)
	if _, err := h.js.Publish(context.Background(), subject, raw); err != nil {
		t.Fatal(err)
	}
	h.turn("a", "s", "plain", time.Time{})
	eventually(t, "the plain turn handled, the escaped one handled or dead-lettered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled["a/plain"] == 1 && (handled["a/escaped"] == 1 || len(h.letters()) == 1)
	})
	if n := h.obs.count(runner.ResultLaned); n != 1 {
		t.Errorf("%d turns acknowledged for a lane, want 1 (the plain one)", n)
	}
}
