package compactfx_test

import (
	"context"
	"github.com/engram-memory/engram/internal/app/apptest"
	"go.uber.org/fx"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/internal/compact/compactfx"
	"github.com/engram-memory/engram/internal/extract/extractfx"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

// TestServeRunsTheCompactor starts a whole process the way `engram serve`
// does (embedded NATS, SQLite in the data dir, the extractor storing the
// transcript and this module) and drives a conversation from turn_ended
// and tokens_reported to a compacted context from the context API.
//
// The assistant's answers are of a realistic size: a summary's block (the
// summary in its ~140-token frame) replaces the first turn, and a turn
// smaller than that cannot be compacted (compact.TooSmall).
func TestServeRunsTheCompactor(t *testing.T) {
	work := strings.Repeat("I read deploy.sh and the k8s manifests, then ran the checks. ", 20)
	srv := llmtest.New(t)
	srv.OnChatAlways(llmtest.SystemContains("handoff summaries"), llmtest.Text("## Active task\n\"Add the rollback step\"\n\n## Goal\nDeploy."))
	srv.SetDefault(llmtest.Example()) // the extractor's structured calls
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := apptest.Start(ctx, t, "compactfx-test", events.ConsumerCompactor, srv.Config(), []fx.Option{extractfx.Module(), compactfx.Module()})
	client := run.Client
	ref := events.Ref{ProjectID: "p1", SessionID: "s1"}
	for i, text := range []string{"Fix the deploy script.", "Add a rollback step.", "Run the tests.", "Thanks."} {
		ref.TurnID = "t" + string(rune('1'+i))
		if _, err := client.PublishTurnEnded(ctx, ref, events.TurnEnded{Messages: []events.Message{
			{Role: events.RoleUser, Content: text},
			{Role: events.RoleAssistant, Content: "Working on it: " + text + " " + work},
		}}); err != nil {
			t.Fatal(err)
		}
		// One turn at a time: the extractor stores turns asynchronously and
		// concurrently, and the split below expects them in order.
		waitMessages(t, ctx, client, events.Ref{ProjectID: ref.ProjectID, SessionID: ref.SessionID}, 2*(i+1))
	}
	ref.TurnID = ""
	deadline := time.Now().Add(60 * time.Second)
	if _, err := client.PublishTokensReported(ctx, ref, events.TokensReported{InputTokens: 70000, ContextWindow: 128000}); err != nil {
		t.Fatal(err)
	}
	for {
		c, err := client.Context(ctx, ref)
		if err == nil && c.Block != "" {
			if !strings.HasPrefix(c.Block, compact.Preamble) || !strings.Contains(c.Block, "Add the rollback step") ||
				len(c.Messages) != 6 || c.Messages[0].Content != "Add a rollback step." {
				t.Fatalf("compacted context: %+v", c)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no compaction: %+v %v", c, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestConfigFitsTheConsumer(t *testing.T) {
	topo := events.DefaultTopology()
	for i := range topo.Consumers {
		if topo.Consumers[i].Name == events.ConsumerCompactor {
			topo.Consumers[i].AckWait = 20 * time.Second
			topo.Consumers[i].MaxDeliver = 3
		}
	}
	cc := compactfx.Config(compact.Defaults(), topo)
	if cc.LeaseTTL != 10*time.Second || cc.MaxFailures != 2 {
		t.Errorf("lease %v, max failures %d; want 10s and 2", cc.LeaseTTL, cc.MaxFailures)
	}
	if err := cc.Validate(); err != nil {
		t.Error(err)
	}
	if d := compactfx.Config(compact.Defaults(), events.DefaultTopology()); d.LeaseTTL != compact.Defaults().LeaseTTL || d.MaxFailures != compact.Defaults().MaxFailures {
		t.Errorf("defaults changed under the default topology: %+v", d)
	}
}

// waitMessages waits until the session's context holds n messages.
func waitMessages(t *testing.T, ctx context.Context, client *events.Client, ref events.Ref, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := client.Context(ctx, ref)
		if err == nil && len(c.Messages) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the transcript never reached %d messages in the context: %+v %v", n, c, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
