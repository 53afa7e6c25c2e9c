package inject_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
	"github.com/engram-memory/engram/pkg/memory"
)

// outage is the injector's real client whose first injection_ready
// publishes fail, as in a NATS outage after the reply and the record.
type outage struct {
	*events.Client
	fail atomic.Int32 // publishes still to fail
}

func (o *outage) Publish(ctx context.Context, e events.Envelope) error {
	if o.fail.Add(-1) >= 0 {
		return errors.New("nats: connection closed (the test's outage)")
	}
	return o.Client.Publish(ctx, e)
}

// outageBus is an embedded NATS server with the topology set up, and the
// injector's client on it as an outage (no publish failing yet).
func outageBus(t *testing.T) (*server.Server, jetstream.JetStream, events.Topology, *outage) {
	t.Helper()
	srv, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	client, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	return srv, js, topo, &outage{Client: client}
}

// runInjector runs h through a runner of cfg on js until the test ends,
// telling seen (unless nil) of each call first. It returns a context that ends with
// the test (60 s at most).
func runInjector(t *testing.T, js jetstream.JetStream, cfg runner.Config, h *inject.Handler, seen func(events.Envelope)) context.Context {
	t.Helper()
	r, err := runner.New(js, cfg, func(ctx context.Context, ev events.Envelope) error {
		if seen != nil {
			seen(ev)
		}
		return h.Handle(ctx, ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		_ = r.Stop(sctx)
	})
	return ctx
}

// TestRedeliveredTurnAnsweredWithItsRecordedBlock: a turn_started whose
// delivery answered the platform and recorded the block, then failed to
// publish injection_ready, is redelivered after a new memory that the turn
// would now recall was stored. The redelivery is answered with the
// recorded block, not a new one: the platform's replies, ENGRAM_OUT and
// the record (what the extractor judges) hold one block. A redelivery
// after the reply deadline is not skipped when the turn has a record: its
// injection_ready is still published. Both stores, a real embedded NATS.
func TestRedeliveredTurnAnsweredWithItsRecordedBlock(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b, nil)
		first := f.add(memory.Node{Subkind: memory.Decision, Label: "Deploys to production run through make release"})

		srv, js, topo, pub := outageBus(t)
		cfg := runner.ConfigFor(topo, events.ConsumerInjector)
		cfg.BackoffBase, cfg.BackoffMax = 1500*time.Millisecond, 1500*time.Millisecond
		var mu sync.Mutex
		handled := map[string]int{} // turn -> deliveries handled
		ctx := runInjector(t, js, cfg, inject.NewHandler(f.inj, pub, nil), func(ev events.Envelope) {
			mu.Lock()
			handled[ev.TurnID]++
			mu.Unlock()
		})

		platform := eventstest.Connect(t, srv)
		pc, err := events.NewClient(platform)
		if err != nil {
			t.Fatal(err)
		}
		replies, err := platform.SubscribeSync("_INBOX.redeliver.>")
		if err != nil {
			t.Fatal(err)
		}
		reply := func(wait time.Duration) (events.InjectionReady, bool) {
			t.Helper()
			m, err := replies.NextMsg(wait)
			if errors.Is(err, nats.ErrTimeout) {
				return events.InjectionReady{}, false
			}
			if err != nil {
				t.Fatal(err)
			}
			e, err := events.Decode(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			return e.Payload.(events.InjectionReady), true
		}
		ref := memory.SessionRef{Project: "p1", Session: "s1"}
		const text = "how do we deploy to production and the staging cluster?"

		for _, tc := range []struct {
			turn    string
			replyBy time.Duration // the redelivery comes 1.5 s after the first delivery
			again   bool          // the redelivery answers the platform again (before the deadline)
		}{
			{"intime", 10 * time.Second, true},
			{"late", 800 * time.Millisecond, false},
		} {
			pub.fail.Store(1)
			e := events.NewTurnStarted(events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: tc.turn},
				events.TurnStarted{Text: text, ReplyTo: "_INBOX.redeliver." + tc.turn, ReplyBy: time.Now().Add(tc.replyBy).UTC()})
			if err := pc.Publish(ctx, e); err != nil {
				t.Fatal(err)
			}
			got, ok := reply(10 * time.Second)
			if !ok || !strings.Contains(got.Block, "make release") && !strings.Contains(got.Block, "argo") {
				t.Fatalf("%s: first answer %v %+v, want a recalled deploy", tc.turn, ok, got)
			}
			// The record is written after the reply.
			var rec memory.Injection
			waitFor(t, func() bool { rec, err = f.st.GetInjection(ctx, ref, tc.turn); return err == nil })
			if !slices.Equal(rec.IDs, got.NodeIDs) || rec.Text != got.Block {
				t.Fatalf("%s: record %+v, want the answered block", tc.turn, rec)
			}
			// Meanwhile a memory the turn would now recall first is stored.
			later := f.add(memory.Node{Subkind: memory.Decision, Label: "The staging cluster deploys production through argo " + tc.turn})
			if fresh, err := f.inj.Compose(ctx, inject.Request{Project: "p1", Session: "s1", Turn: "probe", Text: text, DryRun: true}); err != nil ||
				!slices.Contains(fresh.IDs, later.ID) {
				t.Fatalf("%s: a new block would not carry the new memory (%v %v): the test proves nothing", tc.turn, fresh.IDs, err)
			}

			// The redelivery: answered again (in time) with the same block,
			// injection_ready published once with it, the record unchanged.
			waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return handled[tc.turn] >= 2 })
			if again, ok := reply(5 * time.Second); ok != tc.again {
				t.Fatalf("%s: second reply %v, want %v", tc.turn, ok, tc.again)
			} else if ok && (again.Block != got.Block || !slices.Equal(again.NodeIDs, got.NodeIDs) || !slices.Equal(again.Scores, got.Scores)) {
				t.Errorf("%s: redelivery answered %q %v, want the first block %q %v", tc.turn, again.Block, again.NodeIDs, got.Block, got.NodeIDs)
			}
			out, err := js.Stream(ctx, topo.Out.Name)
			if err != nil {
				t.Fatal(err)
			}
			var m *jetstream.RawStreamMsg
			waitFor(t, func() bool {
				m, err = out.GetLastMsgForSubject(ctx, topo.Subjects().Out(events.TypeInjectionReady, "", "p1", "s1"))
				if err != nil {
					return false
				}
				ev, err := events.Decode(m.Data)
				return err == nil && ev.Payload.(events.InjectionReady).InReplyTo == e.ID
			})
			ev, _ := events.Decode(m.Data)
			ready := ev.Payload.(events.InjectionReady)
			if ready.Block != got.Block || !slices.Equal(ready.NodeIDs, got.NodeIDs) || slices.Contains(ready.NodeIDs, later.ID) {
				t.Errorf("%s: injection_ready %v, want the answered block's %v", tc.turn, ready.NodeIDs, got.NodeIDs)
			}
			if rec, err := f.st.GetInjection(ctx, ref, tc.turn); err != nil || !slices.Equal(rec.IDs, got.NodeIDs) || rec.Text != got.Block {
				t.Errorf("%s: record after the redelivery %v %v, want %v", tc.turn, rec.IDs, err, got.NodeIDs)
			}
			if !slices.Contains(got.NodeIDs, first.ID) {
				t.Errorf("%s: the first block lacks %s: %v", tc.turn, first.ID, got.NodeIDs)
			}
		}
		info, err := js.Stream(ctx, topo.Out.Name)
		if err != nil {
			t.Fatal(err)
		}
		if si, err := info.Info(ctx); err != nil || si.State.Msgs != 2 {
			t.Errorf("ENGRAM_OUT holds %v messages (%v), want one injection_ready per turn", si.State.Msgs, err)
		}
	})
}

// TestReadyPublishOutageSpendsNoDelivery: a turn answered and recorded
// whose injection_ready cannot be published for longer than the injector's
// three deliveries' backoff (a stream leader's failover in a NATS cluster)
// waits for the bus, spending no delivery, and is announced once the bus
// takes it: never dead-lettered (the clustered chaos run lost two answered
// turns so).
func TestReadyPublishOutageSpendsNoDelivery(t *testing.T) {
	f := newFixture(t, storetest.Backend{Name: "sqlite", Open: storetest.OpenSQLite}, nil)
	f.add(memory.Node{Subkind: memory.Decision, Label: "Deploys to production run through make release"})

	srv, js, topo, pub := outageBus(t)
	pub.fail.Store(8)
	cfg := runner.ConfigFor(topo, events.ConsumerInjector)
	if cfg.MaxDeliver != 3 {
		t.Fatalf("the injector's delivery limit is %d: the test's outage is sized for 3", cfg.MaxDeliver)
	}
	// Eight failures outlast three deliveries at any backoff.
	cfg.BackoffBase, cfg.BackoffMax, cfg.WaitMax = 20*time.Millisecond, 40*time.Millisecond, 40*time.Millisecond
	var calls atomic.Int32
	ctx := runInjector(t, js, cfg, inject.NewHandler(f.inj, pub, nil), func(events.Envelope) { calls.Add(1) })

	pc, err := events.NewClient(eventstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	e := events.NewTurnStarted(events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: "t1"},
		events.TurnStarted{Text: "how do we deploy to production?", ReplyTo: "_INBOX.outage.t1", ReplyBy: time.Now().Add(30 * time.Second).UTC()})
	if err := pc.Publish(ctx, e); err != nil {
		t.Fatal(err)
	}
	out, err := js.Stream(ctx, topo.Out.Name)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := js.Stream(ctx, topo.DLQ.Name)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		m, err := out.GetLastMsgForSubject(ctx, topo.Subjects().Out(events.TypeInjectionReady, "", "p1", "s1"))
		if err != nil {
			si, err := dlq.Info(ctx)
			if err == nil && si.State.Msgs > 0 {
				t.Fatalf("the answered turn was dead-lettered after %d handler calls", calls.Load())
			}
			return false
		}
		ev, err := events.Decode(m.Data)
		return err == nil && ev.Payload.(events.InjectionReady).InReplyTo == e.ID
	})
	if n := calls.Load(); n != 9 {
		t.Errorf("handler called %d times, want 9 (eight failed publishes, then the one that landed)", n)
	}
	if si, err := dlq.Info(ctx); err != nil || si.State.Msgs != 0 {
		t.Errorf("ENGRAM_DLQ holds %v letters (%v), want none", si.State.Msgs, err)
	}
	rec, err := f.st.GetInjection(ctx, memory.SessionRef{Project: "p1", Session: "s1"}, "t1")
	if err != nil || len(rec.IDs) == 0 {
		t.Errorf("record %+v %v, want the answered block", rec, err)
	}
}
