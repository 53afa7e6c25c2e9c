package consolidate_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// BenchmarkPass measures what a pass costs the model on a long session:
// steps and model tokens of the first pass, for a model that works
// (stores, recalls, revises, forgets, links, done) and for a stuck one
// (recalls until the budget ends it). The session has 60 turns (the first
// pass reads the oldest messages that fit its window: window_msgs); the
// project holds 40 memories (the memory block is full). Tokens are the
// scripted server's counts (characters / 4 of the messages; tool
// definitions are reported apart, as tool_def_tokens/step).
//
//	go test -run '^$' -bench Pass -benchtime 20x ./internal/consolidate
func BenchmarkPass(b *testing.B) {
	for _, sc := range []struct {
		name   string
		script func(b *testing.B, seeded []memory.Node) []llmtest.Reply
	}{
		{"working", func(b *testing.B, seeded []memory.Node) []llmtest.Reply {
			var rs []llmtest.Reply
			for i := range 6 {
				rs = append(rs, remember(fmt.Sprintf("The user's hobby number %d is %s.", i, []string{"rowing", "pottery", "chess", "baking", "cycling", "origami"}[i]), "preference"))
			}
			rs = append(rs,
				call(consolidate.ToolRecall, map[string]any{"query": "hobby rowing"}),
				callOn(b, consolidate.ToolRevise, seeded[39].Label, map[string]any{"text": "The user now lives in Ghent."}),
				callOn(b, consolidate.ToolForget, seeded[38].Label, nil),
				callOn(b, consolidate.ToolLink, seeded[37].Label, map[string]any{"topic": "travel", "relation": "interested_in"}),
				done())
			return rs
		}},
		{"stuck", func(_ *testing.B, _ []memory.Node) []llmtest.Reply {
			var rs []llmtest.Reply
			for range 20 {
				rs = append(rs, call(consolidate.ToolRecall, map[string]any{"query": "what does the user like"}))
			}
			return rs
		}},
	} {
		b.Run(sc.name, func(b *testing.B) {
			toolTokens := 0
			for _, s := range consolidate.AllTools() {
				js, _ := json.Marshal(s.Parameters)
				toolTokens += llm.EstimateTokens(s.Name) + llm.EstimateTokens(s.Description) + llm.EstimateTokens(string(js))
			}
			var steps, prompt, completion, shown int
			for range b.N {
				b.StopTimer()
				f := newFixture(b, sqliteStore(b))
				var seeded []memory.Node
				for i := range 40 {
					seeded = append(seeded, f.seed(memory.Node{Subkind: memory.Observation,
						Label: fmt.Sprintf("Seeded fact %d: the user mentioned place %d and a friend called F%d.", i, i, i)}))
				}
				for k := range 60 {
					if _, _, err := f.st.AppendTranscript(f.ctx, ref(), fmt.Sprintf("t%d", k), []memory.Message{
						{Role: memory.RoleUser, Content: fmt.Sprintf("Turn %d: I did %s today and I am thinking about it. %s", k, "something", strings.Repeat("More words. ", 20))},
						{Role: memory.RoleAssistant, Content: "That sounds good. " + strings.Repeat("Here is a longer answer. ", 30)},
					}); err != nil {
						b.Fatal(err)
					}
				}
				f.srv.Enqueue(sc.script(b, seeded)...)
				f.srv.OnChatAlways(llmtest.Any(), done()) // the passes after the first
				b.StartTimer()
				res, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				first := res.Passes[0] // the pass measured: the scripted one
				steps += first.Steps
				prompt += first.PromptTokens
				completion += first.CompletionTokens
				shown += len(windowLines(b, f.srv.ChatRequests()[0]))
				b.StartTimer()
			}
			b.ReportMetric(float64(steps)/float64(b.N), "steps/pass")
			b.ReportMetric(float64(prompt)/float64(b.N), "prompt_tokens/pass")
			b.ReportMetric(float64(completion)/float64(b.N), "completion_tokens/pass")
			b.ReportMetric(float64(shown)/float64(b.N), "window_msgs")
			b.ReportMetric(float64(toolTokens), "tool_def_tokens/step")
		})
	}
}
