package extract_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// loop runs the injector and the extractor (its two consumers, as
// extractfx does) on an embedded JetStream server.
type loop struct {
	*fixture
	js        jetstream.JetStream
	topo      events.Topology
	client    *events.Client
	modelGate runner.Gate
	extractor *runner.Runner   // the extractor consumer's
	stopped   []*runner.Runner // stopped on purpose (restartExtractor)
}

func newLoop(t *testing.T, open func(t testing.TB) memory.Store, mod ...func(*extract.Config)) *loop {
	t.Helper()
	f := newFixture(t, open, mod...)
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	client, err := events.NewClient(nc, events.WithJetStream(js), events.WithInjectTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	x, err := extract.New(f.st, f.client, f.emb, client, f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.x = x
	inj, err := inject.New(f.st, f.emb, inject.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	l := &loop{fixture: f, js: js, topo: topo, client: client}
	l.modelGate = runner.GateFunc(func(ctx context.Context) error {
		_, err := f.client.Check(ctx)
		return err
	})
	l.start(events.ConsumerInjector, inject.NewHandler(inj, client, nil).Handle)
	l.start(events.ConsumerTranscript, extract.NewHandler(x, nil).Store)
	l.extractor = l.start(events.ConsumerExtractor, extract.NewHandler(x, nil).Handle, l.modelGate)
	return l
}

// start runs h on the consumer until the test ends (or the runner is
// stopped).
func (l *loop) start(consumer string, h runner.Handler, gates ...runner.Gate) *runner.Runner {
	t := l.t
	cfg := runner.ConfigFor(l.topo, consumer)
	cfg.Concurrency = 2
	cfg.GateInterval = 100 * time.Millisecond
	cfg.UnavailableDelay = 200 * time.Millisecond
	cfg.BackoffBase = 100 * time.Millisecond
	r, err := runner.New(l.js, cfg, h, runner.WithProcessed(l.st), runner.WithGates(gates...))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil && !slices.Contains(l.stopped, r) {
			t.Errorf("stop %s: %v", consumer, err)
		}
	})
	return r
}

func (l *loop) turnEnded(turn, text string) {
	l.t.Helper()
	_, err := l.client.PublishTurnEnded(l.ctx, events.Ref{ProjectID: project, SessionID: session, TurnID: turn},
		events.TurnEnded{Messages: []events.Message{
			{Role: events.RoleUser, Content: text},
			{Role: events.RoleAssistant, Content: "Understood. I will follow that from now on."},
		}})
	if err != nil {
		l.t.Fatal(err)
	}
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *loop) turnDone(turn string) bool {
	ok, err := l.st.EventProcessed(l.ctx, memory.ProjectRef{Project: project}, "extractor.turn", extractTurnKey(session, turn))
	if err != nil {
		l.t.Fatal(err)
	}
	return ok
}

func extractTurnKey(session, turn string) string {
	return strings.Join([]string{strconv.Itoa(len(session)), session, turn}, ":")
}

func (l *loop) streamCount(name string) uint64 {
	l.t.Helper()
	s, err := l.js.Stream(l.ctx, name)
	if err != nil {
		l.t.Fatal(err)
	}
	info, err := s.Info(l.ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	return info.State.Msgs
}

func TestLoopThroughJetStream(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		l := newLoop(t, open)
		seeded := l.seed(memory.Node{Subkind: memory.Pattern, Label: "The build runs with make build from the repository root", Confidence: 0.7})
		ref1 := events.Ref{ProjectID: project, SessionID: session, TurnID: "t1"}
		inj1, err := l.client.Inject(l.ctx, ref1, events.TurnStarted{Text: "How do I run the build of this repository?"})
		if err != nil {
			t.Fatal(err)
		}
		if !contains(inj1.Block, seeded.ID) {
			t.Fatalf("first block does not recall the seeded memory:\n%s", inj1.Block)
		}
		// The injector answers the platform first, then records what it
		// injected and publishes injection_ready. A real turn outlasts
		// that; here turn_ended follows at once, so it waits for the record.
		waitFor(t, "injection_ready for t1 on ENGRAM_OUT", func() bool { return l.streamCount(l.topo.Out.Name) >= 1 })
		l.srv.OnChat(llmtest.SystemContains("long-term memory"), reply(
			[]extract.ReplyVerdict{{ID: seeded.ID, Verdict: "used"}},
			rule("Never use yarn in this project; use pnpm.", "project")))
		l.turnEnded("t1", "How do I run the build of this repository? Also: never use yarn here, we use pnpm.")
		waitFor(t, "turn t1 extracted", func() bool { return l.turnDone("t1") })

		ref2 := events.Ref{ProjectID: project, SessionID: session, TurnID: "t2"}
		inj2, err := l.client.Inject(l.ctx, ref2, events.TurnStarted{Text: "Add the lodash dependency please."})
		if err != nil {
			t.Fatal(err)
		}
		si := strings.Index(inj2.Block, "STANDING INSTRUCTIONS")
		if si < 0 || !contains(inj2.Block[si:], "Never use yarn in this project; use pnpm.") {
			t.Fatalf("second block lacks the user's rule as a standing instruction:\n%s", inj2.Block)
		}
		if got := l.get(seeded.ID); got.Useful != 1 {
			t.Errorf("the injected memory's useful count = %d, want 1 (verdict used)", got.Useful)
		}
		waitFor(t, "memory_changed on ENGRAM_OUT", func() bool { return l.streamCount(l.topo.Out.Name) >= 3 })
		if n := l.streamCount(l.topo.DLQ.Name); n != 0 {
			t.Errorf("%d dead letters", n)
		}
		if n := l.extractCalls(); n != 1 {
			t.Errorf("extraction calls = %d, want 1", n)
		}
	})
}

func TestLoopOutageThenRecovery(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		l := newLoop(t, open)
		l.srv.OnChatAlways(llmtest.SystemContains("long-term memory"),
			reply(nil, rule("Always answer in Indonesian.", "global")))
		l.srv.Down()
		for _, id := range []string{"t1", "t2", "t3"} {
			l.turnEnded(id, "Turn "+id+": please always answer in Indonesian from now on.")
		}
		// The model gate holds the extractor: the events wait in the stream.
		waitFor(t, "three turn_ended events waiting", func() bool { return l.streamCount(l.topo.In.Name) == 3 })
		time.Sleep(500 * time.Millisecond) // several gate intervals with the model down
		cons, err := l.js.Consumer(l.ctx, l.topo.In.Name, events.ConsumerExtractor)
		if err != nil {
			t.Fatal(err)
		}
		// The consumer counts the stored events asynchronously: polled.
		var info *jetstream.ConsumerInfo
		waitFor(t, "the extractor's consumer to count the 3 events", func() bool {
			if info, err = cons.Info(l.ctx); err != nil {
				t.Fatal(err)
			}
			return info.NumPending+uint64(info.NumAckPending) >= 3
		})
		if info.NumPending+uint64(info.NumAckPending) != 3 {
			t.Errorf("during the outage: %d pending, %d in flight; want all 3 waiting", info.NumPending, info.NumAckPending)
		}
		l.srv.Up()
		waitFor(t, "every turn extracted after recovery", func() bool {
			return l.turnDone("t1") && l.turnDone("t2") && l.turnDone("t3")
		})
		if n := l.streamCount(l.topo.DLQ.Name); n != 0 {
			t.Errorf("%d dead letters after an outage, want none", n)
		}
		if n := l.extractCalls(); n < 1 || n > 3 {
			t.Errorf("extraction calls = %d, want 1..3 for 3 turns", n)
		}
		msgs, err := l.st.Messages(l.ctx, ref(), 0, 0)
		if err != nil || len(msgs) != 6 {
			t.Errorf("transcript: %d messages, %v; want 6", len(msgs), err)
		}
		if _, ok := l.find("Always answer in Indonesian."); !ok {
			t.Error("the rule was not extracted after recovery")
		}
	})
}

func TestLoopInvalidReplyDeadLettered(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		l := newLoop(t, open, func(c *extract.Config) { c.InvalidDelay = 100 * time.Millisecond })
		l.srv.OnChatAlways(llmtest.SystemContains("long-term memory"), llmtest.Text("Sure! The user likes pnpm. (no JSON here)"))
		l.turnEnded("t1", "Use pnpm for every install in this repository.")
		waitFor(t, "the span dead-lettered", func() bool { return l.streamCount(l.topo.DLQ.Name) == 1 })
		s, err := l.js.Stream(l.ctx, l.topo.DLQ.Name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := s.GetLastMsgForSubject(l.ctx, l.topo.Subjects().DLQ(events.ConsumerExtractor))
		if err != nil {
			t.Fatal(err)
		}
		reason := m.Header.Get(events.HeaderDLQReason)
		if !contains(reason, "no JSON here") || !contains(reason, "3 failures") {
			t.Errorf("dead-letter reason lacks the failures or the model's last reply: %q", reason)
		}
		if n := l.extractCalls(); n != 2*l.cfg.MaxInvalid {
			t.Errorf("model calls = %d, want %d (each attempt and its repair)", n, 2*l.cfg.MaxInvalid)
		}
		msgs, err := l.st.Messages(l.ctx, ref(), 0, 0)
		if err != nil || len(msgs) != 2 {
			t.Errorf("transcript: %d messages, %v; want it stored", len(msgs), err)
		}
		if !l.turnDone("t1") {
			t.Error("the given-up turn is not marked done: the next span would retry it")
		}
	})
}
