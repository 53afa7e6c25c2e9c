package inject_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestThroughJetStream runs the injector worker on a real embedded NATS
// server: the platform's Inject gets the block, injection_ready lands on
// ENGRAM_OUT, an invalid turn_started is dead-lettered, and a turn whose
// platform stopped waiting is neither answered nor recorded.
func TestThroughJetStream(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b, nil)
		rule := f.add(memory.Node{Subkind: memory.Preference, Label: "Always answer in Indonesian",
			AssertedBy: memory.AssertedUser, Source: memory.SourceUser})
		deploy := f.add(memory.Node{Subkind: memory.Decision, Label: "Deploys to production run through make release"})

		srv, nc := eventstest.RunServer(t)
		topo := eventstest.Topology()
		js := eventstest.Setup(t, nc, topo)
		pub, err := events.NewClient(nc)
		if err != nil {
			t.Fatal(err)
		}
		// As injectfx wires it: no processed-event records (the injector's
		// answers are idempotent by message id).
		ctx := runInjector(t, js, runner.ConfigFor(topo, events.ConsumerInjector), inject.NewHandler(f.inj, pub, nil), nil)

		platform := eventstest.Connect(t, srv)
		client, err := events.NewClient(platform, events.WithInjectTimeout(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ref := events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: "t1"}
		got, err := client.Inject(ctx, ref, events.TurnStarted{Text: "how do we deploy to production?"})
		if err != nil {
			t.Fatalf("inject: %v", err)
		}
		if !strings.Contains(got.Block, "Always answer in Indonesian") || !strings.Contains(got.Block, "make release") {
			t.Fatalf("block lacks the rule or the decision:\n%s", got.Block)
		}
		if len(got.NodeIDs) < 2 || got.NodeIDs[0] != rule.ID || got.NodeIDs[1] != deploy.ID {
			t.Errorf("node ids = %v, want rule then decision", got.NodeIDs)
		}
		// Scores index for index: the standing rule is selected (0), the
		// recalled decision ranked (> 0).
		if len(got.Scores) != len(got.NodeIDs) || len(got.Scores) < 2 || got.Scores[0] != 0 || got.Scores[1] <= 0 {
			t.Errorf("scores = %v for ids %v, want 0 then a positive score", got.Scores, got.NodeIDs)
		}

		// injection_ready is on ENGRAM_OUT too.
		out, err := js.OrderedConsumer(ctx, topo.Out.Name, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{topo.Subjects().OutType(events.TypeInjectionReady)}})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := out.Next(jetstream.FetchMaxWait(20 * time.Second))
		if err != nil {
			t.Fatalf("no injection_ready on ENGRAM_OUT: %v", err)
		}
		ev, err := events.Decode(msg.Data())
		if err != nil {
			t.Fatal(err)
		}
		ready, err := events.PayloadAs[events.InjectionReady](ev)
		if err != nil || ready.InReplyTo != got.EventID || ready.Block != got.Block || !slices.Equal(ready.Scores, got.Scores) {
			t.Errorf("injection_ready = %+v (%v), want the block of %s", ready, err, got.EventID)
		}

		// A platform that already gave up: no answer, no injection record.
		late := events.NewTurnStarted(events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: "late"},
			events.TurnStarted{Text: "how do we deploy to production?", ReplyBy: time.Now().Add(-time.Minute)})
		if err := client.Publish(ctx, late); err != nil {
			t.Fatal(err)
		}
		// An invalid event (wrong payload for the subject's consumer) is dead-lettered.
		bad := events.NewTurnStarted(events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: "bad"}, events.TurnStarted{Text: "x"})
		data, _ := events.Encode(bad)
		data = []byte(strings.Replace(string(data), `"version":1`, `"version":99`, 1))
		subj := topo.Subjects().In(events.TypeTurnStarted, "", "p1", "s1")
		if _, err := js.Publish(ctx, subj, data); err != nil {
			t.Fatal(err)
		}
		dlq, err := js.OrderedConsumer(ctx, topo.DLQ.Name, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		dead, err := dlq.Next(jetstream.FetchMaxWait(20 * time.Second))
		if err != nil {
			t.Fatalf("invalid event not dead-lettered: %v", err)
		}
		if !strings.Contains(string(dead.Data()), `"version":99`) {
			t.Errorf("DLQ holds %s, want the invalid event", dead.Data())
		}
		// Once the injector's consumer is drained, the late event was handled:
		// it left no injection record and no second injection_ready.
		cons, err := js.Consumer(ctx, topo.In.Name, events.ConsumerInjector)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool {
			info, err := cons.Info(ctx)
			return err == nil && info.NumPending == 0 && info.NumAckPending == 0
		})
		if _, err := f.st.GetInjection(ctx, memory.SessionRef{Project: "p1", Session: "s1"}, "late"); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("a turn the platform gave up on was recorded as injected (%v)", err)
		}
		outStream, err := js.Stream(ctx, topo.Out.Name)
		if err != nil {
			t.Fatal(err)
		}
		if info, err := outStream.Info(ctx); err != nil || info.State.Msgs != 1 {
			t.Errorf("ENGRAM_OUT holds %d messages, want the one injection_ready (%v)", info.State.Msgs, err)
		}
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
