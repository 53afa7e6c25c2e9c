package extractfx_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/ollama/ollama/api"
	"go.uber.org/fx"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/app/apptest"
	"github.com/engram-memory/engram/internal/compact/compactfx"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/internal/extract/extractfx"
	"github.com/engram-memory/engram/internal/inject/injectfx"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestServeRunsTheExtractor starts a whole process the way `engram serve`
// does (embedded NATS, SQLite in the data dir, the injector and this
// module) and drives a user's rule from turn_ended into the next block.
func TestServeRunsTheExtractor(t *testing.T) {
	srv := llmtest.New(t)
	srv.OnChatAlways(llmtest.SystemContains("long-term memory"), llmtest.JSON(extract.Reply{
		Verdicts: []extract.ReplyVerdict{},
		Memories: []extract.ReplyMemory{{Subkind: "preference", Scope: "global", Reach: "anywhere", AssertedBy: "user",
			Label: "Always answer in Indonesian.", Confidence: 0.95,
			Paths: []string{}, Entities: []string{}, Relations: []extract.ReplyRelation{}}},
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := apptest.Start(ctx, t, "extractfx-test", events.ConsumerExtractor, srv.Config(), []fx.Option{injectfx.Module(), extractfx.Module()}, events.WithInjectTimeout(20*time.Second))
	client := run.Client
	ref := events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: "t1"}
	if _, err := client.PublishTurnEnded(ctx, ref, events.TurnEnded{Messages: []events.Message{
		{Role: events.RoleUser, Content: "From now on, always answer in Indonesian."},
		{Role: events.RoleAssistant, Content: "Baik, saya akan menjawab dalam bahasa Indonesia."},
	}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for n := 2; ; n++ {
		ref.TurnID = "t" + strconv.Itoa(n)
		inj, err := client.Inject(ctx, ref, events.TurnStarted{Text: "What is the capital of France?"})
		if err == nil && strings.Contains(inj.Block, "Always answer in Indonesian.") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rule never reached a block (last: %q, %v)", inj.Block, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestConfigFitsTheConsumer(t *testing.T) {
	topo := events.DefaultTopology()
	for i := range topo.Consumers {
		if topo.Consumers[i].Name == events.ConsumerExtractor {
			topo.Consumers[i].AckWait = 20 * time.Second
			topo.Consumers[i].MaxDeliver = 2
		}
	}
	xc := extractfx.Config(extract.Defaults(), topo)
	if xc.LeaseTTL != 10*time.Second || xc.MaxInvalid != 1 {
		t.Errorf("lease %v, max invalid %d; want 10s and 1", xc.LeaseTTL, xc.MaxInvalid)
	}
	if err := xc.Validate(); err != nil {
		t.Error(err)
	}
	if d := extractfx.Config(extract.Defaults(), events.DefaultTopology()); d.LeaseTTL != extract.Defaults().LeaseTTL || d.MaxInvalid != extract.Defaults().MaxInvalid {
		t.Errorf("defaults changed under the default topology: %+v", d)
	}
}

// startProcess starts a process like apptest.StartConfig, stopped by the
// caller (a restart in the middle of a test), with st the process's store.
func startProcess(ctx context.Context, t *testing.T, cfg config.Config, st *memory.Store) (*app.Process, *events.Client, *nats.Conn) {
	t.Helper()
	p, err := app.Start(ctx, cfg, true, "extractfx-outage", extractfx.Module(), compactfx.Module(), fx.Populate(st))
	if err != nil {
		t.Fatal(err)
	}
	if roles := strings.Join(p.Workers.Roles(), ","); roles != "compactor,extractor,transcript" {
		t.Fatalf("running workers %q, want compactor,extractor,transcript (the extractor role runs both turn_ended consumers)", roles)
	}
	auth, _, err := app.ConnectOptions(cfg, natsauth.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(p.Bus.URL, auth...)
	if err != nil {
		t.Fatal(err)
	}
	client, err := events.NewClient(nc, events.WithPrefix(cfg.Events.SubjectPrefix))
	if err != nil {
		t.Fatal(err)
	}
	return p, client, nc
}

// consumerState is a consumer's pending and unacknowledged counts.
func consumerState(ctx context.Context, t *testing.T, nc *nats.Conn, name string) (pending uint64, ackPending int) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, events.StreamIn, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.NumPending, info.NumAckPending
}

func dlqCount(ctx context.Context, t *testing.T, nc *nats.Conn) uint64 {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, events.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// TestServeStoresTranscriptsWhileModelDown runs the process as `engram
// serve` does with Ollama down: 20 turns end, and each is in the context
// API (what `engram context` prints) at once, with the compactor's token
// estimate growing; the process restarts in the middle of the outage;
// `engram consolidate`'s pass finds the messages (it used to say "nothing
// new since the last pass"); when the model is back every turn is
// extracted and nothing is dead-lettered.
func TestServeStoresTranscriptsWhileModelDown(t *testing.T) {
	srv := llmtest.New(t)
	srv.OnChatAlways(llmtest.SystemContains("long-term memory"), llmtest.Func(func(req api.ChatRequest) llmtest.Reply {
		var mems []extract.ReplyMemory
		if strings.Contains(req.Messages[len(req.Messages)-1].Content, "Sourdough") {
			mems = append(mems, extract.ReplyMemory{Subkind: "preference", Scope: "global", Reach: "anywhere", AssertedBy: "user",
				Label: "The user bakes Sourdough bread every Sunday.", Confidence: 0.95,
				Paths: []string{}, Entities: []string{}, Relations: []extract.ReplyRelation{}})
		}
		return llmtest.JSON(extract.Reply{Verdicts: []extract.ReplyVerdict{}, Memories: append([]extract.ReplyMemory{}, mems...)})
	}))
	srv.Down()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := apptest.Config(t, srv.Config())
	cfg.Work.ShutdownTimeout = 2 * time.Second

	var st memory.Store
	p, client, nc := startProcess(ctx, t, cfg, &st)
	ref := events.Ref{ProjectID: "p1", SessionID: "s1"}
	sess := memory.SessionRef{Project: "p1", Session: "s1"}
	var tokens int64
	const turns = 20
	for n := 1; n <= turns; n++ {
		ref.TurnID = "t" + strconv.Itoa(n)
		text := fmt.Sprintf("Turn %d: tell me about bread.", n)
		if n == 1 {
			text = "Turn 1: I bake Sourdough bread every Sunday."
		}
		if _, err := client.PublishTurnEnded(ctx, ref, events.TurnEnded{Messages: []events.Message{
			{Role: events.RoleUser, Content: text},
			{Role: events.RoleAssistant, Content: "Noted: " + text},
		}}); err != nil {
			t.Fatal(err)
		}
		// In the context at once, with the model down.
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, err := client.Context(ctx, events.Ref{ProjectID: "p1", SessionID: "s1"})
			if err == nil && len(c.Messages) == 2*n {
				if c.Messages[2*n-2].Content != text || c.Tokens <= tokens {
					t.Fatalf("turn %d: context %+v (tokens before %d)", n, c, tokens)
				}
				tokens = c.Tokens
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("turn %d never reached the context with the model down: %+v %v", n, c, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if pending, ack := consumerState(ctx, t, nc, events.ConsumerExtractor); pending+uint64(ack) != turns {
		t.Errorf("the extractor consumer holds %d+%d turns during the outage, want %d", pending, ack, turns)
	}
	if n := srv.Calls("/api/chat"); n != 0 {
		t.Errorf("%d chat calls with the model down", n)
	}
	// A restart in the middle of the outage.
	nc.Close()
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	// `engram consolidate` by hand (its own store: one process per SQLite
	// file): the pass finds the messages; the model is down, so it stops
	// there and says so.
	st2, err := app.OpenStore(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := app.NewLLM(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := consolidate.New(st2, c, cfg.Consolidate)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cons.Run(ctx, consolidate.Request{Project: "p1", Session: "s1"})
	if res.Empty || !errors.Is(err, llm.ErrUnavailable) {
		t.Errorf("engram consolidate with the transcript stored and the model down: %+v, %v; want the pass to stop on the model", res, err)
	}
	if err := st2.Close(); err != nil {
		t.Fatal(err)
	}

	// The model is back; the process starts again and catches up.
	srv.Up()
	p, _, nc = startProcess(ctx, t, cfg, &st)
	defer func() {
		nc.Close()
		if err := p.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		pending, ack := consumerState(ctx, t, nc, events.ConsumerExtractor)
		if pending == 0 && ack == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the extractor never caught up: %d pending, %d unacknowledged", pending, ack)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for n := 1; n <= turns; n++ {
		done, err := st.EventProcessed(ctx, sess.ProjectRef(), "extractor.turn", fmt.Sprintf("%d:%s:t%d", len(sess.Session), sess.Session, n))
		if err != nil || !done {
			t.Errorf("turn %d not extracted: %v", n, err)
		}
	}
	msgs, err := st.Messages(ctx, sess, 0, 0)
	if err != nil || len(msgs) != 2*turns {
		t.Errorf("transcript: %d messages, %v; want %d", len(msgs), err, 2*turns)
	}
	found := false
	err = st.Scan(ctx, func(n memory.Node) error {
		found = found || n.Label == "The user bakes Sourdough bread every Sunday."
		return nil
	}, func(memory.Edge) error { return nil })
	if err != nil || !found {
		t.Errorf("the first turn's memory was not extracted after the outage (%v)", err)
	}
	if n := dlqCount(ctx, t, nc); n != 0 {
		t.Errorf("%d dead letters", n)
	}
}

// TestCompactorWaitsForTheTranscriptNotTheExtraction: the compactor judges
// a session by its stored transcript once the transcript consumer has
// stored the session's last turn (events.NewTranscriptLag), not once the
// extractor has extracted it: with the extraction call hanging, a report
// under the threshold is answered instead of retried until the extraction
// ends (it used to wait for the extractor consumer).
func TestCompactorWaitsForTheTranscriptNotTheExtraction(t *testing.T) {
	srv := llmtest.New(t)
	release := make(chan struct{})
	srv.OnChatAlways(llmtest.SystemContains("long-term memory"), llmtest.Func(func(api.ChatRequest) llmtest.Reply {
		<-release // the extraction hangs until the test ends
		return llmtest.JSON(extract.Reply{Verdicts: []extract.ReplyVerdict{}, Memories: []extract.ReplyMemory{}})
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := apptest.Config(t, srv.Config())
	var st memory.Store
	p, client, nc := startProcess(ctx, t, cfg, &st)
	defer func() {
		close(release)
		nc.Close()
		if err := p.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	ref := events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: "t1"}
	if _, err := client.PublishTurnEnded(ctx, ref, events.TurnEnded{Messages: []events.Message{
		{Role: events.RoleUser, Content: "Deploy the web app to staging."}, {Role: events.RoleAssistant, Content: "Deploying."}}}); err != nil {
		t.Fatal(err)
	}
	ref.TurnID = ""
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := client.Context(ctx, ref)
		if err == nil && len(c.Messages) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn never reached the context: %+v %v", c, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// No count: the compactor estimates the stored transcript (under the
	// threshold) while the extraction of the turn hangs.
	if _, err := client.PublishTokensReported(ctx, ref, events.TokensReported{ContextWindow: 128000}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		pending, ack := consumerState(ctx, t, nc, events.ConsumerCompactor)
		if pending == 0 && ack == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the report is still waiting (%d pending, %d unacknowledged) for the extraction", pending, ack)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if pending, ack := consumerState(ctx, t, nc, events.ConsumerExtractor); pending+uint64(ack) != 1 {
		t.Errorf("the extractor consumer holds %d+%d turns, want the hanging one", pending, ack)
	}
}
