package compact_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// codingTurn scripts turn i of a coding conversation: the user's request,
// one to three tool calls (read a file, edit it, run the tests) with their
// results, and the assistant's answer. About 1,500 tokens a turn.
func codingTurn(rng *rand.Rand, i int) []memory.Message {
	file := fmt.Sprintf("internal/service/handler_%03d.go", rng.IntN(60))
	msgs := []memory.Message{{Role: memory.RoleUser, Content: fmt.Sprintf(
		"Turn %d: the %s endpoint returns a 500 when the request body is empty. Please fix it in %s, keep the error format we agreed on, and run the tests.",
		i, []string{"orders", "users", "billing", "search"}[rng.IntN(4)], file)}}
	code := strings.Repeat(fmt.Sprintf("func handle%d(w http.ResponseWriter, r *http.Request) {\n\tif err := decode(r, &req); err != nil {\n\t\twriteError(w, 400, err)\n\t\treturn\n\t}\n}\n", i), 4+rng.IntN(8))
	calls := 1 + rng.IntN(3)
	for k := range calls {
		id := fmt.Sprintf("call-%d-%d", i, k)
		var name, args, result string
		status := memory.ToolOK
		switch k {
		case 0:
			name, args, result = "read_file", fmt.Sprintf(`{"path":%q}`, file), code
		case 1:
			name, args = "edit_file", fmt.Sprintf(`{"path":%q,"old":"return","new":"writeError(w, 400, errEmptyBody)\n\t\treturn","note":%q}`, file, strings.Repeat("x", 200))
			result = "edited 1 occurrence"
		default:
			name, args = "bash", `{"cmd":"go test ./internal/service/..."}`
			if rng.IntN(4) == 0 {
				status = memory.ToolFailed
				result = "--- FAIL: TestHandleEmptyBody (0.00s)\n    handler_test.go:42: status 500, want 400\nFAIL\n" + strings.Repeat("ok  \tpkg\t0.01s\n", 20)
			} else {
				result = strings.Repeat("ok  \tgithub.com/acme/web/internal/service\t0.412s\n", 30)
			}
		}
		msgs = append(msgs,
			memory.Message{Role: memory.RoleAssistant, Content: "Next step.", ToolCalls: []memory.ToolCall{{ID: id, Name: name, Arguments: args}}},
			memory.Message{Role: memory.RoleTool, ToolName: name, ToolCallID: id, ToolStatus: status, Content: result})
	}
	msgs = append(msgs, memory.Message{Role: memory.RoleAssistant, Content: fmt.Sprintf(
		"Fixed in %s: an empty body now returns 400 with the agreed error format. %s", file, strings.Repeat("The tests pass. ", 10+rng.IntN(20)))})
	return msgs
}

// BenchmarkConversation replays a scripted 500-turn coding conversation as
// a platform would: after each turn it stores the turn, reports the tokens
// it sent (system prompt + what the context API returned), lets the
// compactor decide, and rebuilds its next context from the API. It reports
// the tokens the platform sends per turn without compaction (the whole
// history) and with it, and the compactor's overhead without model time:
// the wall time of a compacting Compact minus its summary call (as the llm
// client observes it), the time of a report under the threshold, and the
// time to build a context (the context API's store reads, without NATS). The scripted model answers at once with a 1,500-token summary.
func BenchmarkConversation(b *testing.B) {
	const (
		turns        = 500
		systemTokens = 2000
		window       = 128000
	)
	for _, be := range storetest.Backends(b) {
		b.Run(be.Name, func(b *testing.B) {
			summary := summaryText("Fix the empty-body 500s") + strings.Repeat("- internal/service/handler_017.go: returns 400 on an empty body (fixed, tests pass)\n", 70)
			var full, compacted, maxFull, maxCompacted, reports, compactions, steps int64
			var reportNanos, compactNanos, contextNanos, modelNanos atomic.Int64
			for range b.N {
				b.StopTimer()
				f := newFixture(b, func(t testing.TB) memory.Store { return be.Open(t) })
				f.srv.OnChatAlways(nil, llmtest.Text(summary))
				client, err := llm.New(f.srv.Config(), llm.WithObserver(llm.ObserverFunc(func(ci llm.CallInfo) {
					modelNanos.Add(int64(ci.Latency))
				})))
				if err != nil {
					b.Fatal(err)
				}
				c, err := compact.New(f.st, client, f.pub, f.cfg)
				if err != nil {
					b.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(21, 500))
				var history int64 // the whole conversation, in tokens
				ref := events.Ref{ProjectID: project, SessionID: session}
				b.StartTimer()
				for i := 1; i <= turns; i++ {
					msgs := codingTurn(rng, i)
					if _, _, err := f.st.AppendTranscript(f.ctx, sref(), fmt.Sprintf("t%d", i), msgs); err != nil {
						b.Fatal(err)
					}
					history += compact.Tokens(msgs)
					// What the platform sent for this turn: the context before
					// it (built before the turn) plus the turn itself.
					start := time.Now()
					ctxt, err := c.Context(f.ctx, ref, events.ContextRequest{})
					contextNanos.Add(int64(time.Since(start)))
					if err != nil {
						b.Fatal(err)
					}
					sentWith := systemTokens + ctxt.Tokens
					sentWithout := systemTokens + history
					full += sentWithout
					compacted += sentWith
					maxFull, maxCompacted = max(maxFull, sentWithout), max(maxCompacted, sentWith)
					start = time.Now()
					res, err := c.Compact(f.ctx, compact.Report{EventID: events.NewID(), Project: project, Session: session,
						InputTokens: sentWith, ContextWindow: window, At: time.Now()})
					took := int64(time.Since(start))
					if err != nil {
						b.Fatal(err)
					}
					reports++
					if res.Outcome == compact.Compacted {
						compactions++
						steps += int64(res.Steps)
						compactNanos.Add(took)
					} else {
						reportNanos.Add(took)
					}
				}
			}
			n := float64(b.N)
			perTurn := n * turns
			b.ReportMetric(float64(full)/perTurn, "tokens/turn-without")
			b.ReportMetric(float64(compacted)/perTurn, "tokens/turn-with")
			b.ReportMetric(float64(maxFull), "max-tokens-without")
			b.ReportMetric(float64(maxCompacted), "max-tokens-with")
			b.ReportMetric(float64(compactions)/n, "compactions")
			b.ReportMetric(float64(steps)/max(float64(compactions), 1), "calls/compaction")
			b.ReportMetric(float64(reportNanos.Load())/1e3/float64(reports-compactions), "us/report-below")
			if compactions > 0 {
				b.ReportMetric(float64(compactNanos.Load()-modelNanos.Load())/1e6/float64(compactions), "overhead-ms/compaction")
			}
			b.ReportMetric(float64(contextNanos.Load())/1e6/float64(reports), "context-ms/turn")
			b.ReportMetric(float64(modelNanos.Load())/1e6/max(float64(compactions), 1), "model-ms/compaction")
		})
	}
}

// TestConversationShape checks the benchmark's conversation: compaction
// keeps what the platform sends under the threshold while the history grows
// far past it.
func TestConversationShape(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 500))
	var tokens []int64
	for i := 1; i <= 20; i++ {
		tokens = append(tokens, compact.Tokens(codingTurn(rng, i)))
	}
	slices.Sort(tokens)
	if med := tokens[len(tokens)/2]; med < 400 || med > 3000 {
		t.Fatalf("median turn %d tokens, want a coding turn's few hundred to few thousand", med)
	}
}
