package compact_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// loop runs the compactor on an embedded JetStream server with the runner,
// and the context service on the same connection.
type loop struct {
	*fixture
	js     jetstream.JetStream
	client *events.Client
	r      *runner.Runner
}

func newLoop(t *testing.T, open func(t testing.TB) memory.Store) *loop {
	t.Helper()
	return newLoopWith(t, open, nil)
}

// newLoopWith is newLoop with the compactor's constants changed by mod and
// its options.
func newLoopWith(t *testing.T, open func(t testing.TB) memory.Store, mod func(*compact.Config), opts ...compact.Option) *loop {
	t.Helper()
	var mods []func(*compact.Config)
	if mod != nil {
		mods = append(mods, mod)
	}
	f := newFixture(t, open, mods...)
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	client, err := events.NewClient(nc, events.WithJetStream(js))
	if err != nil {
		t.Fatal(err)
	}
	c, err := compact.New(f.st, f.client, client, f.cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	cfg := runner.ConfigFor(topo, events.ConsumerCompactor)
	cfg.GateInterval = 100 * time.Millisecond
	cfg.UnavailableDelay = 200 * time.Millisecond
	cfg.BackoffBase = 100 * time.Millisecond
	r, err := runner.New(js, cfg, compact.NewHandler(c, nil).Handle, runner.WithProcessed(f.st),
		runner.WithGates(runner.GateFunc(compact.ModelGate(f.client))))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	svc, err := client.ServeContext(c.Context, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Stop(); err != nil {
			t.Errorf("stop context service: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop runner: %v", err)
		}
	})
	return &loop{fixture: f, js: js, client: client, r: r}
}

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

func TestOutageWaitsAndLosesNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		l := newLoop(t, open)
		for range 3 {
			l.turn("How do we deploy?")
		}
		l.srv.Down()
		ref := events.Ref{ProjectID: project, SessionID: session}
		if _, err := l.client.PublishTokensReported(l.ctx, ref, events.TokensReported{InputTokens: 90000, ContextWindow: 128000}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the compactor to pause on the model", func() bool { return l.r.Status().Paused })
		time.Sleep(500 * time.Millisecond) // a few gate intervals: nothing is pulled, nothing dead-lettered
		if _, err := l.st.LatestSummary(l.ctx, sref()); !memory.IsNotFound(err) {
			t.Fatalf("summary during the outage: %v", err)
		}
		if n := l.streamCount(events.StreamDLQ); n != 0 {
			t.Fatalf("%d dead letters during an outage", n)
		}
		// The turn loop does not wait for the compactor: the context is
		// there, uncompacted.
		got, err := l.client.Context(l.ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if got.Block != "" || len(got.Messages) != 12 {
			t.Fatalf("context during the outage: block %q, %d messages", got.Block, len(got.Messages))
		}
		l.srv.OnChatAlways(nil, llmtest.Text(summaryText("Fix the deploy")))
		l.srv.Up()
		waitFor(t, "the summary", func() bool {
			_, err := l.st.LatestSummary(l.ctx, sref())
			return err == nil
		})
		waitFor(t, "compaction_done on ENGRAM_OUT", func() bool { return l.streamCount(events.StreamOut) == 1 })
		if n := l.streamCount(events.StreamDLQ); n != 0 {
			t.Fatalf("%d dead letters", n)
		}
		s, _ := l.js.Stream(l.ctx, events.StreamOut)
		m, err := s.GetMsg(l.ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := events.Decode(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		cd, ok := ev.Payload.(events.CompactionDone)
		if !ok || cd.UpTo != 4 || cd.TokensBefore != 90000 || cd.TokensAfter <= 0 || cd.TokensAfter >= 90000 ||
			m.Subject != (events.Subjects{}).Out(events.TypeCompactionDone, "", project, session) {
			t.Fatalf("compaction_done %+v on %s", ev, m.Subject)
		}

		// The context API: the preamble, the summary, the end marker, then
		// the messages after the boundary with their tool calls.
		got, err = l.client.Context(l.ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got.Block, compact.Preamble) || !strings.Contains(got.Block, "Fix the deploy") ||
			!strings.HasSuffix(got.Block, compact.EndMarker) || got.UpTo != 4 || got.Summary == "" {
			t.Fatalf("block:\n%s", got.Block)
		}
		if len(got.Messages) != 8 || got.Messages[0].ID != 5 || got.Messages[0].Role != events.RoleUser || got.Messages[0].TurnID != "t2" {
			t.Fatalf("messages after the boundary: %+v", got.Messages)
		}
		call, result := got.Messages[1], got.Messages[2]
		if len(call.ToolCalls) != 1 || call.ToolCalls[0].ID != "call-t2" || result.ToolCallID != "call-t2" ||
			result.Role != events.RoleTool || result.ToolStatus != events.ToolOK {
			t.Fatalf("tool call and result: %+v / %+v", call, result)
		}
		if got.Tokens <= 0 || got.Tokens != cd.TokensAfter {
			t.Fatalf("context tokens %d, compaction_done says %d", got.Tokens, cd.TokensAfter)
		}
	})
}
