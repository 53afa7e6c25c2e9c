package consolidate_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestEveryRequestFitsItsContext: with everything at its largest (long
// Chinese messages, which count a token a character; a full memories
// listing of long facts; a recall whose hits are long; a cascade of long
// dependants; nudges repeating the journal) every request sends num_ctx
// and num_predict, and its prompt, estimated as the consolidator counts,
// leaves the reply its room: the window shrinks to fit (a message longer
// than the window is cut, with the cut marked), the last call's result and
// the cascade are cut to fit and say so, and the instructions, the
// memories listing and the directive are whole.
func TestEveryRequestFitsItsContext(t *testing.T) {
	for _, ctxTokens := range []int{8192, 6144} {
		t.Run(fmt.Sprint(ctxTokens), func(t *testing.T) {
			cfg := consolidate.Defaults()
			f := newFixtureWindow(t, ctxTokens)
			long := strings.Repeat("用户每天早上在公园里跑步然后喝一杯热茶", 14) // 280 characters
			var facts []memory.Node
			for i := range 40 {
				facts = append(facts, f.seed(memory.Node{Subkind: memory.Observation, Label: fmt.Sprintf("%s %d harbour", long, i)}))
			}
			hub := f.seed(memory.Node{Subkind: memory.Observation, Label: "The user works at the harbour office in Bergen."})
			for _, n := range facts[:12] {
				if _, err := f.st.Link(f.ctx, memory.Edge{Src: n.ID, Dst: hub.ID, Relation: memory.CausedBy}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 6 {
				f.say(fmt.Sprintf("M%04d %s", 2*i+1, strings.Repeat("我今天在港口工作了很久。", 400)), fmt.Sprintf("M%04d Noted.", 2*i+2))
			}
			f.srv.Enqueue(
				call(consolidate.ToolRecall, map[string]any{"query": "harbour 用户每天早上在公园里跑步"}),
				callOn(t, consolidate.ToolRevise, hub.Label, map[string]any{"text": "The user works from home."}),
				llmtest.Text(strings.Repeat("我认为一切都很好。", 100)),
				llmtest.Text("Still nothing to add."),
			)
			f.srv.OnChatAlways(llmtest.Any(), done())
			f.run()
			reqs := f.srv.ChatRequests()
			assertWithinContext(t, f.srv)
			budget := cfg.BudgetFor(ctxTokens)
			for i, r := range reqs {
				if c, _ := num(r.Options["num_ctx"]); c != ctxTokens {
					t.Fatalf("request %d: num_ctx %d", i, c)
				}
				if r.Messages[0].Content != consolidate.SystemText+"\n\n"+consolidate.Instructions {
					t.Fatalf("request %d: the instructions are not whole", i)
				}
				last := r.Messages[len(r.Messages)-1].Content
				if !strings.Contains(last, "\n\nNEXT\n") || !strings.Contains(last, "STORED MEMORIES\n[f") {
					t.Fatalf("request %d: the directive or the memories listing is missing:\n%s", i, last)
				}
				if n := consolidate.EstimateTokens(last); n > cfg.MemoryTokens+consolidate.NoteTokens {
					t.Fatalf("request %d: a trailing message of %d tokens", i, n)
				}
			}
			first := windowLines(t, reqs[0])
			if len(first) != 1 || !strings.HasSuffix(first[0], "…") || consolidate.EstimateTokens(first[0])+1 > budget.Transcript {
				t.Fatalf("the first window (%d lines) is not one message cut to the %d tokens left", len(first), budget.Transcript)
			}
			if s := f.trailing(1); !strings.Contains(s, "RESULT OF YOUR LAST CALL\nRecall ") || !strings.Contains(s, "more cut to fit the context)") {
				t.Errorf("the recall's result is not cut to fit, or does not say so:\n%s", s)
			}
			if s := f.trailing(2); !strings.Contains(s, "linked to these live memories") {
				t.Errorf("the cascade is missing:\n%s", s)
			}
			if s := f.trailing(3); !strings.Contains(s, "Only a tool call moves anything") {
				t.Errorf("the nudge is missing:\n%s", s)
			}
			// Every message was read, one window after another.
			var read []string
			for _, p := range firstSteps(reqs) {
				for _, l := range windowLines(t, p) {
					read = append(read, msgMark.FindString(l))
				}
			}
			if len(read) != 12 || read[0] != "M0001" || read[11] != "M0012" {
				t.Fatalf("read %v", read)
			}
		})
	}
}

// TestContextTooSmallIsRefused: a context window that leaves no room for
// the transcript is refused with how the window is shared: at start when
// it is configured (Config.ContextTokens), and as a permanent error of the
// pass (dead-lettered with the reason, no model call) when the client
// tells it (ENGRAM_CONSOLIDATE_CONTEXT_LENGTH or the model's own).
func TestContextTooSmallIsRefused(t *testing.T) {
	cfg := consolidate.Defaults()
	cfg.ContextTokens = 4096
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "a context window of 4096 tokens leaves") || !strings.Contains(err.Error(), "memories 512") {
		t.Fatalf("validate: %v", err)
	}
	f := newFixtureWindow(t, 4096)
	f.say("I keep bees.", "")
	_, err = f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session})
	if !errors.Is(err, llm.ErrInvalidRequest) || !runner.IsPermanent(consolidate.Classify(err)) || !strings.Contains(err.Error(), "ENGRAM_CONSOLIDATE_CONTEXT_LENGTH") {
		t.Fatalf("a pass with a 4096-token window: %v", err)
	}
	if n := len(f.srv.ChatRequests()); n != 0 || f.cursor() != 0 {
		t.Fatalf("%d model calls, cursor %d", n, f.cursor())
	}
}
