package ollamae2e

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/tools/tinymodel/tiny"
)

// consolidateModel is a tiny chat model whose control tokens emit the
// consolidator's own tool calls (the shared model's calls are the generic
// recall of the llm tests).
const consolidateModel = "engram-tiny-consolidate"

var consolidateCalls = []tiny.Call{
	{Name: consolidate.ToolRemember, Arguments: map[string]any{"text": "The user keeps bees.", "kind": "pattern", "said_by_user": true, "reason": "stated"}},
	{Name: consolidate.ToolRecall, Arguments: map[string]any{"query": "bees"}},
	{Name: consolidate.ToolDone, Arguments: map[string]any{"summary": "stored the bees"}},
}

var consolidateOnce struct {
	sync.Once
	err error
}

// needConsolidateModel creates consolidateModel on the shared server once.
func needConsolidateModel(t *testing.T) {
	t.Helper()
	s := need(t)
	consolidateOnce.Do(func() {
		files, err := tiny.Generate(filepath.Join(s.dir, "tiny-consolidate"), tiny.Options{Seed: modelSeed, Calls: consolidateCalls})
		if err != nil {
			consolidateOnce.err = err
			return
		}
		consolidateOnce.err = s.create(consolidateModel, files.Chat)
	})
	if consolidateOnce.err != nil {
		t.Fatalf("create %s: %v", consolidateModel, consolidateOnce.err)
	}
}

// TestConsolidatorToolsAccepted: the real Ollama takes every memory tool's
// definition (enums, booleans, bounded strings) in one request, as a pass
// offers them, and the model answers.
func TestConsolidatorToolsAccepted(t *testing.T) {
	c := client(t)
	tools := consolidate.AllTools()
	resp, err := c.Chat(ctxT(t), llm.Request{Role: llm.RoleConsolidate, Project: "p1",
		Messages: []llm.Message{llm.System(consolidate.SystemText + "\n\n" + consolidate.Instructions), llm.User("Nothing happened.")},
		Tools:    tools})
	if err != nil {
		t.Fatalf("%d tools offered: %v", len(tools), err)
	}
	if resp.DoneReason != "stop" {
		t.Errorf("done %q", resp.DoneReason)
	}
}

// steering plays the model's decision: it appends the control token of
// the next scripted call to each step's last message (the consolidator
// neutralises the transcript, so the token cannot come from there).
type steering struct {
	c     *llm.Client
	mu    sync.Mutex
	calls []int
	seen  []llm.Request
}

func (s *steering) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	s.mu.Lock()
	next := 2 // done
	if len(s.calls) > 0 {
		next, s.calls = s.calls[0], s.calls[1:]
	}
	s.seen = append(s.seen, req)
	s.mu.Unlock()
	msgs := append([]llm.Message(nil), req.Messages...)
	last := &msgs[len(msgs)-1]
	last.Content += "\n" + tiny.CallControl(next)
	req.Messages = msgs
	return s.c.Chat(ctx, req)
}

// TestConsolidatorToolCallRoundTrip runs a whole pass against the real
// Ollama: each step the model calls a memory tool through Ollama's
// tool-call parser, the consolidator decodes and applies it, and the next
// step's context carries the result (remember, then a recall that finds
// what was stored, then done).
func TestConsolidatorToolCallRoundTrip(t *testing.T) {
	needConsolidateModel(t)
	c := client(t, func(cfg *llm.Config) {
		cfg.Consolidate = llm.ModelConfig{Name: consolidateModel, KeepAlive: 5 * time.Minute, Timeout: 2 * time.Minute}
	})
	ctx := ctxT(t)
	st := storetest.OpenSQLite(t)
	ref := memory.SessionRef{Project: "p1", Session: "s1"}
	if _, _, err := st.AppendTranscript(ctx, ref, "t1", []memory.Message{
		{Role: memory.RoleUser, Content: "I keep bees, three hives in the garden."},
		{Role: memory.RoleAssistant, Content: "Lovely!"}}); err != nil {
		t.Fatal(err)
	}
	model := &steering{c: c, calls: []int{0, 1, 2}}
	cons, err := consolidate.New(st, model, consolidate.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	res, err := cons.Run(ctx, consolidate.Request{Project: ref.Project, Session: ref.Session})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != consolidate.VerdictDone || res.Pass.Steps != 3 || res.Outcome.Stored != 1 || res.Outcome.Recalled < 1 {
		t.Fatalf("pass %+v (outcome %+v)", res.Pass, res.Outcome)
	}
	if res.Pass.PromptTokens == 0 || res.Pass.CompletionTokens == 0 {
		t.Errorf("no model tokens counted: %+v", res.Pass)
	}
	t.Logf("pass of %d steps: %d prompt tokens, %d completion tokens (Ollama's counts, tool definitions included)",
		res.Pass.Steps, res.Pass.PromptTokens, res.Pass.CompletionTokens)
	third := model.seen[2].Messages[len(model.seen[2].Messages)-1].Content
	if !strings.Contains(third, "Recall \"bees\" found:") || !strings.Contains(third, "The user keeps bees.") {
		t.Errorf("the recall's result did not reach the next step:\n%s", third)
	}
	for _, name := range []string{consolidate.ToolRecall, consolidate.ToolRemember, consolidate.ToolDone} {
		found := false
		for _, s := range model.seen[0].Tools {
			found = found || s.Name == name
		}
		if !found {
			t.Errorf("tool %s not offered", name)
		}
	}
	c0, _ := st.Cursor(ctx, ref)
	if c0 != 2 {
		t.Errorf("cursor %d, want 2", c0)
	}
}
