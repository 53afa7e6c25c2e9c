package sqlite_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// TestChannelsOfASmallProjectInABigStore: where a filter sees few of the
// store's memories (its project, the tenant's global ones and, across
// projects, those of reach anywhere: scopes.go), the lexical channel
// scores those only (visible.go; its scores are held to the whole index's
// by TestSearchVisibleMatches) and the vector channel takes their exact
// cosines: every hit is one memory.Visible shows (other tenants, other
// projects, another session's memories are in the store), and the vector
// hits are the visible memories' best cosines, best first.
func TestChannelsOfASmallProjectInABigStore(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "m.db"))
	defer s.Close()
	rng := rand.New(rand.NewPCG(45, 3))
	words := []string{"cache", "queue", "ledger", "invoice", "tax", "refund", "webhook", "retry", "token", "session"}
	dim := 16
	var nodes []memory.Node
	for i := range 3000 {
		project := fmt.Sprintf("p%02d", min(int(rng.ExpFloat64()*6), 40)) // p00 holds the most
		tenant := ""
		if i%7 == 0 {
			tenant = "other"
		}
		reach := memory.ReachHere
		if i%11 == 0 {
			reach = memory.ReachAnywhere
		}
		if i%97 == 0 {
			project = "" // global
		}
		vec := make([]float32, dim)
		for d := range vec {
			vec[d] = float32(rng.NormFloat64())
		}
		scope, session := memory.ScopeProject, ""
		if i%13 == 0 && project != "" {
			scope, session = memory.ScopeSession, "s9" // another session's: hidden from the filters below
		}
		if project == "" {
			scope = memory.ScopeGlobal
		}
		nodes = append(nodes, memory.Node{ID: fmt.Sprintf("n%04d", i), Subkind: memory.Decision, TenantID: tenant, ProjectID: project,
			Scope: scope, SessionID: session, Reach: reach, Label: words[rng.IntN(len(words))] + " " + words[rng.IntN(len(words))], Body: words[rng.IntN(len(words))] + fmt.Sprintf(" item%d", i),
			Embedding: vec, EmbeddingModel: "m"})
	}
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitIndexed(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	byID := map[string]*memory.Node{}
	for i := range nodes {
		byID[nodes[i].ID] = &nodes[i]
	}
	cos := func(a, b []float32) float64 {
		var d, na, nb float64
		for i := range a {
			d += float64(a[i]) * float64(b[i])
			na += float64(a[i]) * float64(a[i])
			nb += float64(b[i]) * float64(b[i])
		}
		return d / math.Sqrt(na*nb)
	}
	checked := 0
	for _, p := range []string{"p05", "p09", "p14", "p20"} {
		for _, cross := range []bool{false, true} {
			f := memory.Filter{ProjectID: p, CrossProject: cross}
			shown := 0
			for i := range nodes {
				if memory.Visible(&nodes[i], f, now) {
					shown++
				}
			}
			if shown == 0 || shown*4 > len(nodes) {
				t.Fatalf("project %s sees %d of %d memories: the test needs a small project", p, shown, len(nodes))
			}
			lex, err := s.Lexical(ctx, []string{"ledger", "refund"}, f, 60)
			if err != nil {
				t.Fatal(err)
			}
			if len(lex) == 0 {
				t.Fatalf("project %s: no lexical hit", p)
			}
			for _, h := range lex {
				if !memory.Visible(byID[h.ID], f, now) {
					t.Fatalf("project %s: lexical hit %s is not visible to %+v", p, h.ID, f)
				}
			}
			q := make([]float32, dim)
			for d := range q {
				q[d] = float32(rng.NormFloat64())
			}
			vec, err := s.Vector(ctx, "m", q, f, 10)
			if err != nil {
				t.Fatal(err)
			}
			type exact struct {
				id string
				c  float64
			}
			var want []exact
			for i := range nodes {
				if c := cos(q, nodes[i].Embedding); c > 0 && memory.Visible(&nodes[i], f, now) {
					want = append(want, exact{nodes[i].ID, c})
				}
			}
			slices.SortFunc(want, func(a, b exact) int { return cmp.Compare(b.c, a.c) })
			if len(vec) != min(10, len(want)) {
				t.Fatalf("project %s: %d vector hits, %d visible memories with a positive cosine", p, len(vec), len(want))
			}
			for i, h := range vec {
				if !memory.Visible(byID[h.ID], f, now) {
					t.Fatalf("project %s: vector hit %s is not visible", p, h.ID)
				}
				if d := math.Abs(h.Score - cos(q, byID[h.ID].Embedding)); d > 0.01 {
					t.Fatalf("project %s: vector hit %s scores %v, cosine %v", p, h.ID, h.Score, cos(q, byID[h.ID].Embedding))
				}
				if math.Abs(h.Score-want[i].c) > 0.01 {
					t.Fatalf("project %s: hit %d scores %v, the exact %d-th best cosine is %v (%s)", p, i, h.Score, i, want[i].c, want[i].id)
				}
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("nothing checked")
	}
}
