package extract_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// BenchmarkTurn measures the extractor's pipeline overhead per turn with a
// scripted model that answers at once: transcript append, span search,
// related-memory retrieval (against 1,000 memories in the project), the
// model round trip over HTTP, writing one new memory with its vector (one
// embedding call), records and memory_changed. One turn per span. Reports
// the median and p99 latency per turn and turns per second, and the same
// percentiles without the model calls' wall time (chat and the two
// embedding calls, as the llm client observes them: "overhead").
func BenchmarkTurn(b *testing.B) {
	for _, be := range storetest.Backends(b) {
		b.Run(be.Name, func(b *testing.B) {
			f := newFixture(b, func(t testing.TB) memory.Store { return be.Open(t) })
			seedGraph(b, f, 1000)
			var n atomic.Int64
			f.srv.OnChatAlways(llmtest.SystemContains("long-term memory"), llmtest.Func(func(api.ChatRequest) llmtest.Reply {
				i := n.Add(1)
				return reply(nil, extract.ReplyMemory{Subkind: "observation", Scope: "project", Reach: "here",
					AssertedBy: "assistant", Label: fmt.Sprintf("Service s%d listens on port %d", i, 8000+i), Confidence: 0.7})
			}))
			var modelNanos atomic.Int64
			client, err := llm.New(f.srv.Config(), llm.WithObserver(llm.ObserverFunc(func(ci llm.CallInfo) {
				modelNanos.Add(int64(ci.Latency))
			})))
			if err != nil {
				b.Fatal(err)
			}
			x, err := extract.New(f.st, client, client.Embedder(), f.pub, f.cfg)
			if err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			over := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				t0 := time.Now()
				m0 := modelNanos.Load()
				res, err := x.HandleTurn(f.ctx, extract.Turn{Project: project, Session: session, Turn: fmt.Sprintf("b%d", i),
					Messages: []memory.Message{
						{Role: memory.RoleUser, Content: fmt.Sprintf("Turn %d: which port does service s%d use, and how is it deployed?", i, i)},
						{Role: memory.RoleAssistant, Content: "It listens on the port in its config file; it is deployed through the staging cluster first, then production.",
							ToolCalls: []memory.ToolCall{{Name: "read_file"}}},
						{Role: memory.RoleTool, ToolName: "read_file", ToolStatus: memory.ToolOK, Content: "port: 8080"},
					}})
				if err != nil {
					b.Fatal(err)
				}
				if res.Spans != 1 {
					b.Fatalf("turn %d: %d spans", i, res.Spans)
				}
				d := time.Since(t0)
				lat = append(lat, d)
				over = append(over, d-time.Duration(modelNanos.Load()-m0))
			}
			total := time.Since(start)
			b.StopTimer()
			slices.Sort(lat)
			slices.Sort(over)
			b.ReportMetric(ms(lat[len(lat)/2]), "p50_ms")
			b.ReportMetric(ms(lat[min(len(lat)-1, len(lat)*99/100)]), "p99_ms")
			b.ReportMetric(ms(over[len(over)/2]), "overhead_p50_ms")
			b.ReportMetric(ms(over[min(len(over)-1, len(over)*99/100)]), "overhead_p99_ms")
			b.ReportMetric(float64(b.N)/total.Seconds(), "turns/s")
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// seedGraph stores n memories with vectors in the project.
func seedGraph(b *testing.B, f *fixture, n int) {
	b.Helper()
	topics := []string{"deploy", "database", "cache", "auth", "logging", "build", "tests", "frontend", "queue", "billing"}
	nodes := make([]memory.Node, n)
	texts := make([]string, n)
	for i := range nodes {
		t := topics[i%len(topics)]
		nodes[i] = memory.Node{ID: memory.NewID(), Subkind: memory.Observation, Scope: memory.ScopeProject, ProjectID: project,
			Label: fmt.Sprintf("The %s component %d uses setting %s_%d", t, i, t, i), Confidence: 0.6}
		texts[i] = memory.EmbedText(&nodes[i])
	}
	for i := 0; i < n; i += 64 {
		j := min(n, i+64)
		vecs, err := f.emb.Embed(f.ctx, texts[i:j])
		if err != nil {
			b.Fatal(err)
		}
		for k := i; k < j; k++ {
			nodes[k].Embedding, nodes[k].EmbeddingModel = vecs[k-i], f.emb.Model()
		}
	}
	if err := f.st.PutBatch(f.ctx, nodes, nil); err != nil {
		b.Fatal(err)
	}
}
