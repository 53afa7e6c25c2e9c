package erase

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// BenchmarkErase measures an erasure of one project (100 memories with
// vectors, 10 sessions of 4 messages) out of a store of 100 such projects
// (10,000 memories), persistence included (SQLite: VACUUM and the log
// truncated), without and with the verification; no bus. Each iteration
// erases another project (-benchtime up to 100x).
func BenchmarkErase(b *testing.B) {
	backends := []storetest.Backend{{Name: "sqlite", Open: storetest.OpenSQLite}}
	if os.Getenv("ENGRAM_TEST_REDIS_URL") != "" {
		backends = append(backends, storetest.Backend{Name: "redis", Open: storetest.OpenRedis})
	}
	const projects, perProject, sessions = 100, 100, 10
	for _, be := range backends {
		for _, verify := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/verify=%v", be.Name, verify), func(b *testing.B) {
				ctx := context.Background()
				st := be.Open(b)
				for p := range projects {
					proj := fmt.Sprintf("user-%03d", p)
					nodes := make([]memory.Node, perProject)
					for i := range nodes {
						v := make([]float32, 64)
						v[(p+i)%64], v[(p*7+i*3)%64] = 1, 0.5
						nodes[i] = memory.Node{ID: fmt.Sprintf("%s-n%03d", proj, i), TenantID: "acme", ProjectID: proj,
							SessionID: fmt.Sprintf("s%d", i%sessions), Subkind: memory.Observation,
							Label:     fmt.Sprintf("%s remembers fact number %d about the garden", proj, i),
							Body:      "a longer body of text so that the memory has some weight to it " + proj,
							Embedding: v, EmbeddingModel: "m"}
					}
					if err := st.PutBatch(ctx, nodes, nil); err != nil {
						b.Fatal(err)
					}
					for s := range sessions {
						ref := memory.SessionRef{Tenant: "acme", Project: proj, Session: fmt.Sprintf("s%d", s)}
						for turn := range 2 {
							if _, _, err := st.AppendTranscript(ctx, ref, fmt.Sprint("t", turn), []memory.Message{
								{Role: memory.RoleUser, Content: "a question of " + proj}, {Role: memory.RoleAssistant, Content: "an answer"}}); err != nil {
								b.Fatal(err)
							}
						}
					}
				}
				e := New(st)
				if b.N > projects {
					b.Fatalf("at most %d iterations", projects)
				}
				b.ResetTimer()
				start := time.Now()
				for i := range b.N {
					r, err := e.Erase(ctx, Scope{Tenant: "acme", Project: fmt.Sprintf("user-%03d", i)}, Options{Verify: verify})
					if err != nil || r.Store.Memories != perProject {
						b.Fatalf("%+v %v", r.Store, err)
					}
				}
				b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/erasure")
			})
		}
	}
}
