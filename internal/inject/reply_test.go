package inject_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestReplyToOnlyInboxes replays issue 23's attacks: a crafted turn_started
// whose reply_to names the idle detector's key-value bucket, another
// project's input subject or another project's output subject. Nothing is
// published there (no core message, no KV key, nothing stored in ENGRAM_IN
// or ENGRAM_OUT), nothing is recorded, and each event is dead-lettered with
// the reason. An inbox under the default or a configured prefix is still
// answered.
func TestReplyToOnlyInboxes(t *testing.T) {
	b := storetest.Backends(t)[0] // SQLite: the check comes before the store
	f := newFixture(t, b, nil)
	f.add(memory.Node{Subkind: memory.Decision, Label: "Deploys to production run through make release"})

	srv, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ENGRAM_ACTIVITY", Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := events.NewClient(nc, events.WithReplyPrefixes("_INBOX.", "_INBOX_acme."))
	if err != nil {
		t.Fatal(err)
	}
	runInjector(t, js, runner.ConfigFor(topo, events.ConsumerInjector),
		inject.NewHandler(f.inj, pub, nil, inject.WithReplyPrefixes("_INBOX.", "_INBOX_acme.")), nil)

	// An attacker's connection watches everything published on the server.
	spy := eventstest.Connect(t, srv)
	seen := make(chan string, 4096)
	if _, err := spy.Subscribe(">", func(m *nats.Msg) {
		select {
		case seen <- m.Subject:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}

	platform := eventstest.Connect(t, srv)
	client, err := events.NewClient(platform)
	if err != nil {
		t.Fatal(err)
	}
	attacks := []string{
		"$KV.ENGRAM_ACTIVITY.x",
		topo.Subjects().In(events.TypeTurnEnded, "", "other", "s1"),
		topo.Subjects().Out(events.TypeMemoryChanged, "", "other", ""),
		"_INBOX", // the prefix alone is no inbox
		"_INBOXES.x",
	}
	ids := map[string]string{}
	for i, subj := range attacks {
		e := events.NewTurnStarted(events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: "attack" + string(rune('a'+i))},
			events.TurnStarted{Text: "how do we deploy to production?", ReplyTo: subj})
		if err := client.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
		ids[e.ID] = subj
	}

	dlq, err := js.OrderedConsumer(ctx, topo.DLQ.Name, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for range attacks {
		m, err := dlq.Next(jetstream.FetchMaxWait(20 * time.Second))
		if err != nil {
			t.Fatalf("an attack was not dead-lettered: %v", err)
		}
		ev, err := events.Decode(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		subj, ok := ids[ev.ID]
		if !ok {
			t.Fatalf("unexpected dead letter %s", m.Data())
		}
		delete(ids, ev.ID)
		reason := m.Headers().Get(events.HeaderDLQReason)
		if !strings.Contains(reason, "reply_to") || !strings.Contains(reason, subj) {
			t.Errorf("dead letter of reply_to %q has reason %q, want one naming reply_to and the subject", subj, reason)
		}
	}

	// A legitimate inbox, default and configured, is answered.
	got, err := client.Inject(ctx, events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: "ok"}, events.TurnStarted{Text: "how do we deploy to production?"})
	if err != nil || !strings.Contains(got.Block, "make release") {
		t.Fatalf("inject through the default inbox: %v %q", err, got.Block)
	}
	acme, err := platform.SubscribeSync("_INBOX_acme.t1")
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Publish(ctx, events.NewTurnStarted(events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: "acme"},
		events.TurnStarted{Text: "how do we deploy to production?", ReplyTo: "_INBOX_acme.t1"})); err != nil {
		t.Fatal(err)
	}
	if m, err := acme.NextMsg(20 * time.Second); err != nil || !strings.Contains(string(m.Data), "make release") {
		t.Fatalf("no answer on the configured inbox prefix: %v", err)
	}

	// Nothing reached the attacked subjects.
	attacked := map[string]bool{}
	for _, a := range attacks {
		attacked[a] = true
	}
	for len(seen) > 0 {
		if s := <-seen; attacked[s] {
			t.Errorf("the injector published on %s", s)
		}
	}
	if _, err := kv.Get(ctx, "x"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("KV key x written (%v)", err)
	}
	in, err := js.Stream(ctx, topo.In.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.GetLastMsgForSubject(ctx, topo.Subjects().In(events.TypeTurnEnded, "", "other", "s1")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("a forged turn_ended was stored (%v)", err)
	}
	out, err := js.Stream(ctx, topo.Out.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.GetLastMsgForSubject(ctx, topo.Subjects().Out(events.TypeMemoryChanged, "", "other", "")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("a forged memory_changed was stored (%v)", err)
	}
	// Two answers on ENGRAM_OUT (the legitimate turns), none for the attacks.
	waitFor(t, func() bool {
		info, err := out.Info(ctx)
		return err == nil && info.State.Msgs == 2
	})
	for _, turn := range []string{"attacka", "attackb", "attackc"} {
		if _, err := f.st.GetInjection(ctx, memory.SessionRef{Project: "p1", Session: "s1"}, turn); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("turn %s with a forbidden reply_to was recorded as injected (%v)", turn, err)
		}
	}
}

// Respond itself refuses a subject outside the reply prefixes.
func TestRespondRefusesNonInbox(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	c, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	e := events.New(events.Ref{ProjectID: "p", SessionID: "s", TurnID: "t"}, events.InjectionReady{InReplyTo: "x"})
	if err := c.Respond("$KV.ENGRAM_ACTIVITY.x", e); !errors.Is(err, events.ErrInvalidEvent) {
		t.Errorf("Respond to a KV subject: %v, want an invalid-event error", err)
	}
	if _, err := events.NewClient(nc, events.WithReplyPrefixes("$JS.API.")); err == nil {
		t.Error("a $JS reply prefix was accepted")
	}
	if _, err := events.NewClient(nc, events.WithReplyPrefixes("engram.out")); err == nil {
		t.Error("a reply prefix under the Engram subjects was accepted")
	}
}
