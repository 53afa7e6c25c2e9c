package memory_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm/hashembed"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestRetrieveOnStores checks the hybrid ranker's arithmetic on real stores:
// reciprocal-rank fusion, anchor activation, graph expansion mass and the
// filters applied to graph-reached nodes.
func TestRetrieveOnStores(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		st := b.Open(t, storetest.WithClock(func() time.Time { return now }))
		ctx := context.Background()
		emb := hashembed.New(384)
		add := func(n memory.Node) memory.Node {
			t.Helper()
			if n.ProjectID == "" && n.Scope != memory.ScopeGlobal {
				n.ProjectID = "p1"
			}
			n.Confidence = 1
			r, err := st.Upsert(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.SetEmbedding(ctx, r.Node.ID, emb.Model(), emb.Vector(memory.EmbedText(&n))); err != nil {
				t.Fatal(err)
			}
			return r.Node
		}
		direct := add(memory.Node{Subkind: memory.Decision, Label: "Kubernetes deploys use helm charts"})
		linked := add(memory.Node{Subkind: memory.Failure, Label: "Unrelated words entirely here"})
		hidden := add(memory.Node{Subkind: memory.Failure, Label: "Another unrelated phrase", Scope: memory.ScopeSession, SessionID: "other"})
		anchored := add(memory.Node{Subkind: memory.Pattern, Label: "Fonts load from the CDN", Paths: []string{"web/fonts.css"}})
		for _, dst := range []string{linked.ID, hidden.ID} {
			if _, err := st.Link(ctx, memory.Edge{Src: direct.ID, Dst: dst, Relation: memory.RelatesTo}); err != nil {
				t.Fatal(err)
			}
		}
		q := memory.Query{Text: "kubernetes helm deploys", Vector: emb.Vector("kubernetes helm deploys"), Model: emb.Model(),
			AnchorPaths: []string{"web/fonts.css"}, Filter: memory.Filter{ProjectID: "p1", SessionID: "s1"},
			Expand: true, Now: now}
		hits, err := memory.Retrieve(ctx, st, q)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]memory.Hit{}
		for _, h := range hits {
			got[h.ID] = h
		}
		d, ok := got[direct.ID]
		if !ok || d.Lexical != 1 || d.Vector != 1 {
			t.Fatalf("direct hit = %+v, want rank 1 in both channels (hits %+v)", d, hits)
		}
		lw, vw := memory.QueryProfile(q.Text).Weights()
		if want := lw/61 + vw/61; math.Abs(d.Fused-want) > 1e-9 {
			t.Errorf("fused = %v, want %v", d.Fused, want)
		}
		a, ok := got[anchored.ID]
		if !ok || !a.Path || math.Abs(a.Activation-memory.AnchorActivation) > 1e-12 {
			t.Errorf("anchored hit = %+v, want activation 1/120 through its path", a)
		}
		l, ok := got[linked.ID]
		if !ok || !l.Graph {
			t.Fatalf("linked node not reached through the graph: %+v", hits)
		}
		// The hidden neighbour is not eligible: the whole 0.45 x mass goes to
		// the one visible neighbour.
		if want := d.Fused * memory.ExpansionDecay; math.Abs(l.Activation-want) > 1e-9 {
			t.Errorf("graph activation = %v, want %v", l.Activation, want)
		}
		if math.Abs(l.Score-l.Activation*l.Prior) > 1e-12 {
			t.Errorf("graph-reached score = %v, want activation x prior", l.Score)
		}
		if _, ok := got[hidden.ID]; ok {
			t.Errorf("another session's memory reached through the graph")
		}
		if hits[0].ID != direct.ID {
			t.Errorf("best hit %s, want the direct match", hits[0].ID)
		}
	})
}
