package consolidatefx_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"

	"github.com/engram-memory/engram/internal/app/apptest"
	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/consolidate/consolidatefx"
	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/internal/extract/extractfx"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

// TestServeRunsTheConsolidator starts a process the way `engram serve`
// does (embedded NATS, SQLite, the extractor storing transcripts and this
// module) and drives a session from turn_ended and session_idle to
// consolidation_done.
func TestServeRunsTheConsolidator(t *testing.T) {
	srv := llmtest.New(t)
	srv.OnChat(llmtest.HasTool(consolidate.ToolRemember),
		llmtest.ToolCall(consolidate.ToolRemember, map[string]any{"text": "The user keeps bees.", "kind": "pattern", "said_by_user": true}),
		llmtest.ToolCall(consolidate.ToolDone, map[string]any{}))
	srv.OnChatAlways(llmtest.HasFormat(), llmtest.JSON(extract.Reply{Verdicts: []extract.ReplyVerdict{}, Memories: []extract.ReplyMemory{}}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := apptest.Start(ctx, t, "consolidatefx-test", events.ConsumerConsolidator, srv.Config(), []fx.Option{extractfx.Module(), consolidatefx.Module()})
	cfg, nc, client := run.Config, run.Conn, run.Client
	out, err := nc.SubscribeSync(events.Subjects{Prefix: cfg.Events.SubjectPrefix}.OutType(events.TypeConsolidationDone))
	if err != nil {
		t.Fatal(err)
	}
	ref := events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: "t1"}
	if _, err := client.PublishTurnEnded(ctx, ref, events.TurnEnded{Messages: []events.Message{
		{Role: events.RoleUser, Content: "I keep bees in my garden, three hives."},
		{Role: events.RoleAssistant, Content: "Lovely!"},
	}}); err != nil {
		t.Fatal(err)
	}
	// The transcript is stored by the extractor; until it is, a pass finds
	// nothing to do, so idle events are published until one is consolidated.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := client.PublishSessionIdle(ctx, events.Ref{ProjectID: "p1", SessionID: "s1"}, events.SessionIdle{LastActivity: time.Now()}); err != nil {
			t.Fatal(err)
		}
		msg, err := out.NextMsg(time.Second)
		if err == nil {
			ev, err := events.Decode(msg.Data)
			if err != nil {
				t.Fatal(err)
			}
			d, err := events.PayloadAs[events.ConsolidationDone](ev)
			if err != nil {
				t.Fatal(err)
			}
			if d.Stored != 1 || d.Reason != "done" || d.Steps != 2 || d.Pass == "" || d.UpTo != 2 {
				t.Fatalf("consolidation_done %+v", d)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no consolidation_done: %v", err)
		}
	}
}

// TestModelOutageMidPass: the model goes away in the middle of a pass; the
// worker pauses (the event waits, nothing is dead-lettered), and when the
// model is back the redelivered event resumes the pass from its journal.
func TestModelOutageMidPass(t *testing.T) {
	srv := llmtest.New(t)
	srv.OnChat(llmtest.HasTool(consolidate.ToolRemember),
		llmtest.ToolCall(consolidate.ToolRemember, map[string]any{"text": "The user keeps bees.", "kind": "pattern"}),
		llmtest.Func(func(api.ChatRequest) llmtest.Reply {
			srv.Down() // this very call fails: connection closed
			return llmtest.ToolCall(consolidate.ToolDone, map[string]any{})
		}),
		llmtest.ToolCall(consolidate.ToolDone, map[string]any{}))
	srv.OnChatAlways(llmtest.HasFormat(), llmtest.JSON(extract.Reply{Verdicts: []extract.ReplyVerdict{}, Memories: []extract.ReplyMemory{}}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := apptest.Start(ctx, t, "consolidatefx-outage", events.ConsumerConsolidator, srv.Config(), []fx.Option{extractfx.Module(), consolidatefx.Module()})
	cfg, nc, client := run.Config, run.Conn, run.Client
	subjects := events.Subjects{Prefix: cfg.Events.SubjectPrefix}
	out, err := nc.SubscribeSync(subjects.OutType(events.TypeConsolidationDone))
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := nc.SubscribeSync(subjects.DLQAll())
	if err != nil {
		t.Fatal(err)
	}
	ref := events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: "t1"}
	if _, err := client.PublishTurnEnded(ctx, ref, events.TurnEnded{Messages: []events.Message{
		{Role: events.RoleUser, Content: "I keep bees in my garden, three hives."}}}); err != nil {
		t.Fatal(err)
	}
	// The extractor's model call comes after the transcript is stored.
	for deadline := time.Now().Add(30 * time.Second); srv.Calls("/api/chat") == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the extractor never ran")
		}
	}
	if _, err := client.PublishSessionIdle(ctx, events.Ref{ProjectID: "p1", SessionID: "s1"}, events.SessionIdle{LastActivity: time.Now()}); err != nil {
		t.Fatal(err)
	}
	paused := func() bool {
		for _, c := range run.Process.Workers.Checks() {
			if c.Name == "worker:"+events.ConsumerConsolidator && c.Run(ctx) != nil {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !paused(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the consolidator did not pause while the model was down")
		}
	}
	if _, err := out.NextMsg(3 * time.Second); err == nil {
		t.Fatal("consolidation_done while the model was down")
	}
	srv.Up()
	msg, err := out.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no consolidation_done after the model came back: %v", err)
	}
	ev, err := events.Decode(msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	d, err := events.PayloadAs[events.ConsolidationDone](ev)
	if err != nil {
		t.Fatal(err)
	}
	if d.Stored != 1 || d.Steps != 2 || d.Reason != "done" {
		t.Fatalf("consolidation_done %+v: the pass did not resume where it stopped", d)
	}
	if m, err := dlq.NextMsg(100 * time.Millisecond); err == nil {
		t.Fatalf("dead letter for an outage: %s", m.Data)
	}
}

func TestConfigFitsTheConsumer(t *testing.T) {
	topo := events.DefaultTopology()
	for i := range topo.Consumers {
		if topo.Consumers[i].Name == events.ConsumerConsolidator {
			topo.Consumers[i].AckWait = 20 * time.Second
		}
	}
	if c := consolidatefx.Config(consolidate.Defaults(), topo); c.LeaseTTL != 10*time.Second || c.Validate() != nil {
		t.Errorf("lease %v, want 10s", c.LeaseTTL)
	}
}

// TestConfigForTheWindow: the consolidation model's window, when set, is
// the window the consolidator plans with, and one too small for a step's
// prompt is refused at start.
func TestConfigForTheWindow(t *testing.T) {
	cfg := apptest.Config(t, llmtest.New(t).Config())
	topo := events.DefaultTopology()
	if c := consolidatefx.ConfigFor(cfg, topo); c.ContextTokens != 0 || c.Validate() != nil {
		t.Fatalf("unset: context %d, %v", c.ContextTokens, c.Validate())
	}
	cfg.LLM.Consolidate.ContextLength = 16384
	if c := consolidatefx.ConfigFor(cfg, topo); c.ContextTokens != 16384 || c.Validate() != nil {
		t.Fatalf("16384: context %d, %v", c.ContextTokens, c.Validate())
	}
	cfg.LLM.Consolidate.ContextLength = 4096
	if err := consolidatefx.ConfigFor(cfg, topo).Validate(); err == nil || !strings.Contains(err.Error(), "4096") {
		t.Fatalf("4096: %v", err)
	}
}
