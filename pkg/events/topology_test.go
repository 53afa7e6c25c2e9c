package events_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

func TestDefaultTopologyValid(t *testing.T) {
	if err := events.DefaultTopology().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestTopologyValidateListsEveryProblem(t *testing.T) {
	topo := events.DefaultTopology()
	topo.Prefix = "bad prefix"
	topo.In.Name = "ENGRAM.IN"
	topo.Out.Duplicates = 0
	topo.DLQ.Replicas = 0
	topo.DLQ.MaxBytes = 0
	topo.Consumers[0].AckWait = 0
	topo.Consumers[1].Types = []events.Type{events.TypeMemoryChanged}
	topo.Consumers[4].Types = []events.Type{events.TypeTokensReported} // the transcript consumer
	topo.Consumers[4].Role = "bad role"
	topo.Consumers[2].Name = topo.Consumers[3].Name
	topo.Consumers[3].MaxAckPending = 0
	topo.Out.MaxMsgsPerSubject = 0
	topo.MaxEventBytes = 0
	err := topo.Validate()
	if err == nil {
		t.Fatal("invalid topology accepted")
	}
	msg := err.Error()
	for _, want := range []string{"prefix", "stream in: name", "stream out: duplicate window", "stream dlq: replicas",
		"stream dlq: max bytes", "injector): ack wait", "not an input type", "name used twice", "max ack pending",
		"stream out: max messages per subject", "max event bytes",
		// The extractor's and the transcript consumer's type changed:
		// turn_ended has no consumer left.
		"no consumer receives turn_ended", "transcript): role must not hold"} {
		if !strings.Contains(msg, want) {
			t.Errorf("validation error lacks %q:\n%s", want, msg)
		}
	}
}

func TestEnsureTopologyIdempotentAndUpdates(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topo := eventstest.Topology()
	for i := 0; i < 2; i++ {
		if err := events.EnsureTopology(ctx, js, topo); err != nil {
			t.Fatalf("ensure #%d: %v", i+1, err)
		}
	}
	for _, name := range []string{events.StreamIn, events.StreamOut, events.StreamDLQ} {
		if _, err := js.Stream(ctx, name); err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
	}
	in, _ := js.Stream(ctx, events.StreamIn)
	info, _ := in.Info(ctx)
	if info.Config.Duplicates != 2*time.Minute || !slices.Equal(info.Config.Subjects, topo.Subjects().InStreams()) || info.Config.Discard != jetstream.DiscardNew {
		t.Fatalf("ENGRAM_IN config %+v", info.Config)
	}
	for _, c := range topo.Consumers {
		cons, err := js.Consumer(ctx, events.StreamIn, c.Name)
		if err != nil {
			t.Fatalf("consumer %s: %v", c.Name, err)
		}
		cc := cons.CachedInfo().Config
		// The runner enforces MaxDeliver; the server has no limit.
		if cc.AckPolicy != jetstream.AckExplicitPolicy || cc.AckWait != c.AckWait || cc.MaxDeliver != -1 ||
			cc.MaxAckPending != c.MaxAckPending || cc.FilterSubject != "engram.in."+string(c.Types[0])+".>" || cc.Durable != c.Name {
			t.Fatalf("consumer %s config %+v", c.Name, cc)
		}
	}

	// An update is applied in place.
	topo.In.MaxAge = 48 * time.Hour
	topo.Consumers[1].AckWait = 42 * time.Second
	// A consumer of an older setup, with a server-side delivery limit.
	old := topo.JetStreamConsumerConfig(topo.Consumers[2])
	old.MaxDeliver = 10
	if _, err := js.CreateOrUpdateConsumer(ctx, events.StreamIn, old); err != nil {
		t.Fatal(err)
	}
	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	info, _ = in.Info(ctx)
	if info.Config.MaxAge != 48*time.Hour {
		t.Fatalf("max age not updated: %v", info.Config.MaxAge)
	}
	cons, _ := js.Consumer(ctx, events.StreamIn, topo.Consumers[1].Name)
	if got := cons.CachedInfo().Config.AckWait; got != 42*time.Second {
		t.Fatalf("ack wait not updated: %v", got)
	}
	cons, _ = js.Consumer(ctx, events.StreamIn, topo.Consumers[2].Name)
	if got := cons.CachedInfo().Config.MaxDeliver; got != -1 {
		t.Fatalf("server-side max deliver not lifted: %d", got)
	}

	// An invalid topology is refused before touching the server.
	topo.Consumers = nil
	if err := events.EnsureTopology(ctx, js, topo); err == nil {
		t.Fatal("invalid topology accepted")
	}
}

func TestEnsureTopologyMultiTypeConsumer(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	topo.Prefix = "acme.engram"
	topo.Consumers = append(topo.Consumers, events.ConsumerConfig{Name: "idle-tracker", Types: events.InputTypes,
		AckWait: 5 * time.Second, MaxDeliver: -1, MaxAckPending: 100})
	js := eventstest.Setup(t, nc, topo)
	ctx := context.Background()
	cons, err := js.Consumer(ctx, events.StreamIn, "idle-tracker")
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.FilterSubjects; len(got) != 4 || got[0] != "acme.engram.in.turn_started.>" {
		t.Fatalf("filters %v", got)
	}
	// An event under the custom prefix lands in ENGRAM_IN and in the consumer.
	c, err := events.NewClient(nc, events.WithPrefix("acme.engram"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PublishSessionIdle(ctx, events.Ref{ProjectID: "p", SessionID: "s"}, events.SessionIdle{LastActivity: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// The publish is acknowledged once the stream stored it; the consumer
	// counts it a moment later, so its count is polled (bounded).
	var pending uint64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if pending = info.NumPending; pending == 1 || time.Now().After(deadline) {
			break
		}
	}
	if pending != 1 {
		t.Fatalf("pending %d, want 1", pending)
	}
	if err := events.EnsureTopology(ctx, js, events.Topology{}); err == nil {
		t.Fatal("empty topology accepted")
	}
}
