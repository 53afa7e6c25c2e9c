package consolidate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// TestWaitsForTheTranscript: a session_idle handled while the session's
// turn_ended still waits for the extractor in ENGRAM_IN (the extractor is
// behind: it was paused by a model outage, or killed) finds the transcript
// empty or short. Before, the pass consolidated what was there (or found
// nothing and acknowledged the event), and the rest of the session was
// never consolidated: no later idle event comes for a session that has
// ended. The pass now waits (ErrTranscriptBehind, retried by the runner)
// until the extractor has stored the turn.
func TestWaitsForTheTranscript(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	bus, err := events.NewClient(nc, events.WithJetStream(js))
	if err != nil {
		t.Fatal(err)
	}
	act := consolidate.NewStreamActivity(js, topo.In.Name, topo.Subjects())
	f := newFixture(t, sqliteStore(t), consolidate.WithActivity(act))
	evRef := events.Ref{ProjectID: project, SessionID: session, TurnID: "turn-1"}
	if _, err := bus.PublishTurnEnded(f.ctx, evRef, events.TurnEnded{Messages: []events.Message{
		{Role: events.RoleUser, Content: "I play tennis every Sunday."}, {Role: events.RoleAssistant, Content: "Nice!"}}}); err != nil {
		t.Fatal(err)
	}
	idle := time.Now()

	_, err = f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session, IdleSince: idle})
	if !errors.Is(err, consolidate.ErrTranscriptBehind) {
		t.Fatalf("pass with the turn not stored yet: %v, want ErrTranscriptBehind", err)
	}
	if c := consolidate.Classify(err); runner.IsUnavailable(c) || runner.IsPermanent(c) || !errors.Is(c, consolidate.ErrTranscriptBehind) {
		t.Fatalf("classified as %v (%T), want a retry after a delay", c, c)
	}
	if n := len(f.srv.ChatRequests()); n != 0 || f.cursor() != 0 {
		t.Fatalf("%d model calls, cursor %d before the transcript was stored", n, f.cursor())
	}

	// The extractor (and the idle detector) take the event: the transcript
	// is stored and the message leaves the stream.
	f.say("I play tennis every Sunday.", "Nice!")
	for _, name := range []string{events.ConsumerExtractor, "idle"} {
		cons, err := js.Consumer(f.ctx, topo.In.Name, name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		batch, err := cons.Fetch(10, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if err := m.DoubleAck(f.ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.srv.Enqueue(remember("The user plays tennis every Sunday.", "pattern"), done())
	res, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session, IdleSince: idle})
	if err != nil || res.Verdict != consolidate.VerdictDone || res.Outcome.Stored != 1 {
		t.Fatalf("pass once the transcript is stored: %+v, %v", res, err)
	}
	if _, ok := f.liveTexts()["The user plays tennis every Sunday."]; !ok {
		t.Fatalf("live memories %v", f.liveTexts())
	}
}
