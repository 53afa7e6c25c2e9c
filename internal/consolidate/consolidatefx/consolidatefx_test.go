package consolidatefx_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
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
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.NATS.Listen = "127.0.0.1:-1"
	cfg.HTTP.Addr = ""
	cfg.Idle.Enabled = false
	cfg.Log = config.Log{Format: config.LogJSON, Level: "error"}
	cfg.LLM = srv.Config()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := app.Start(ctx, cfg, true, "consolidatefx-test", extractfx.Module(), consolidatefx.Module())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	if roles := strings.Join(p.Workers.Roles(), ","); !strings.Contains(roles, events.ConsumerConsolidator) {
		t.Fatalf("running workers %q lack the consolidator", roles)
	}
	nc, err := nats.Connect(p.Bus.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	client, err := events.NewClient(nc, events.WithPrefix(cfg.Events.SubjectPrefix))
	if err != nil {
		t.Fatal(err)
	}
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
