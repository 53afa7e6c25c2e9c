package extractfx_test

import (
	"context"
	"github.com/engram-memory/engram/internal/app/apptest"
	"go.uber.org/fx"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/internal/extract/extractfx"
	"github.com/engram-memory/engram/internal/inject/injectfx"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
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
