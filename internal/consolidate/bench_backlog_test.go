package consolidate_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

var benchMark = regexp.MustCompile(`\bM(\d{4})\b`)

// BenchmarkBacklog5000: one run over a 5,000-message session (every 10th a
// tool message, every 97th 6,000 characters), a scripted model that stores
// one fact per pass and then calls memory_done. It reports model calls and
// prompt tokens (characters/4 + 4 a message, as the scripted server
// counts; tool definitions apart) per
// message the passes were shown, and per message the cursor passed. It
// uses only what the package had before passes read backlogs window by
// window, so that it runs on the older code too (docs/consolidation.md has
// both figures):
//
//	go test -run '^$' -bench Backlog5000 -benchtime 3x ./internal/consolidate
func BenchmarkBacklog5000(b *testing.B) {
	for range b.N {
		b.StopTimer()
		f := newFixture(b, sqliteStore(b))
		id := 0
		for turn := 0; id < 5000; turn++ {
			var msgs []memory.Message
			for k := 0; k < 100 && id < 5000; k++ {
				id++
				m := memory.Message{Role: memory.RoleUser, Content: fmt.Sprintf("M%04d I mentioned detail %d of my week.", id, id)}
				if id%2 == 0 {
					m.Role = memory.RoleAssistant
				}
				switch {
				case id%10 == 0:
					m.Role, m.ToolName, m.Content = memory.RoleTool, "search", fmt.Sprintf("M%04d tool output", id)
				case id%97 == 0:
					m.Content += strings.Repeat(" and more words", 400)
				}
				msgs = append(msgs, m)
			}
			if _, _, err := f.st.AppendTranscript(f.ctx, ref(), fmt.Sprintf("turn-%d", turn), msgs); err != nil {
				b.Fatal(err)
			}
		}
		f.srv.OnChatAlways(llmtest.Any(), llmtest.Func(func(req api.ChatRequest) llmtest.Reply {
			last := req.Messages[len(req.Messages)-1].Content
			if strings.Contains(last, "Steps used: 0 of ") {
				m := benchMark.FindString(req.Messages[1].Content)
				return llmtest.ToolCall(consolidate.ToolRemember, map[string]any{"text": "The user mentioned " + m + ".", "kind": "observation"})
			}
			return llmtest.ToolCall(consolidate.ToolDone, map[string]any{})
		}))
		b.StartTimer()
		if _, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		reqs := f.srv.ChatRequests()
		prompt := 0
		shown := map[string]bool{}
		for _, r := range reqs {
			for _, m := range r.Messages {
				prompt += len(m.Content)/4 + 4
			}
			for _, m := range benchMark.FindAllString(r.Messages[1].Content, -1) {
				shown[m] = true
			}
		}
		cur := f.cursor()
		b.ReportMetric(float64(len(reqs)), "calls")
		b.ReportMetric(float64(len(shown)), "msgs_shown")
		b.ReportMetric(float64(cur), "cursor")
		b.ReportMetric(float64(len(reqs))/float64(len(shown)), "calls/shown_msg")
		b.ReportMetric(float64(prompt)/float64(len(shown)), "prompt_tok/shown_msg")
		b.ReportMetric(float64(len(reqs))/float64(cur), "calls/cursor_msg")
		b.ReportMetric(float64(prompt)/float64(cur), "prompt_tok/cursor_msg")
		b.ReportMetric(float64(prompt)/float64(len(reqs)), "prompt_tok/call")
		b.StartTimer()
	}
}
