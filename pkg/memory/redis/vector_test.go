package redis_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// TestVectorWidensAndFallsBack: when the nearest neighbours fail the
// filter, the vector channel widens its unfiltered search, and when even
// the widest finds too few visible ones it falls back to VSIM FILTER.
// Either way it must return the visible nodes nearest the query, in order
// (checked against an exact scan). The result cannot tell a widened search
// from the fallback (widening only saves the slow FILTER), so the first
// case checks the answer; the second fails without the fallback.
func TestVectorWidensAndFallsBack(t *testing.T) {
	c := testClient(t)
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	s := openStore(t, c)
	ctx := t.Context()
	query := []float32{1, 0, 0, 0}
	cosine := func(v []float32) float64 {
		var dot, n float64
		for i := range v {
			dot += float64(v[i] * query[i])
			n += float64(v[i] * v[i])
		}
		return dot / math.Sqrt(n)
	}
	for _, tc := range []struct {
		project string
		hidden  int // archived nodes nearer the query than any visible one
	}{
		{"widen", 100},     // 15 asked, then 60, then 240: all 120 seen
		{"fallback", 1100}, // 15 ... 1,000 asked, none visible: VSIM FILTER
	} {
		var nodes []memory.Node
		var want []memory.Scored
		for i := range tc.hidden {
			nodes = append(nodes, memory.Node{ID: fmt.Sprintf("%s-h%04d", tc.project, i), Subkind: memory.Decision,
				Scope: memory.ScopeProject, ProjectID: tc.project, Label: fmt.Sprintf("hidden %d", i), Confidence: 0.9,
				ArchivedAt: now, Embedding: []float32{1, float32(i) * 0.0001, 0.05, 0}, EmbeddingModel: "m"})
		}
		for i := range 20 {
			n := memory.Node{ID: fmt.Sprintf("%s-v%02d", tc.project, i), Subkind: memory.Decision,
				Scope: memory.ScopeProject, ProjectID: tc.project, Label: fmt.Sprintf("visible %d", i), Confidence: 0.9,
				Embedding: []float32{0.6, 1, 0.1 * float32(i), 0}, EmbeddingModel: "m"}
			nodes = append(nodes, n)
			want = append(want, memory.Scored{ID: n.ID, Score: cosine(n.Embedding)})
		}
		for i := 0; i < len(nodes); i += 300 {
			if err := s.PutBatch(ctx, nodes[i:min(i+300, len(nodes))], nil); err != nil {
				t.Fatal(err)
			}
		}
		slices.SortFunc(want, func(a, b memory.Scored) int {
			if a.Score > b.Score {
				return -1
			}
			return 1
		})
		got, err := s.Vector(ctx, "m", query, memory.Filter{ProjectID: tc.project}, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 5 {
			t.Fatalf("%s: %d results %v, want the 5 nearest visible %v", tc.project, len(got), got, want[:5])
		}
		for i := range got {
			if got[i].ID != want[i].ID || math.Abs(got[i].Score-want[i].Score) > 1e-5 {
				t.Fatalf("%s: got %v, want the 5 nearest visible %v", tc.project, got, want[:5])
			}
		}
	}
}
