package memory_test

import (
	"context"
	"math"
	"slices"
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
		clock := now.Add(-24 * time.Hour)
		st := b.Open(t, storetest.WithClock(func() time.Time { return clock }))
		ctx := context.Background()
		emb := hashembed.New(384)
		add := func(n memory.Node) memory.Node {
			t.Helper()
			// Written hours apart: no two are one conversation (see
			// TestRetrieveConversationNeighbours).
			clock = clock.Add(2 * memory.ConversationGap)
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
			Expand: true, Now: now, Ranking: &memory.Ranking{Fusion: memory.FuseRanks, Lexical: 0.8, Vector: 1.2, Prior: 1}}
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

		// The default: scores fused over each channel's best, so the best
		// hit of both channels has the sum of the weights, and an anchor
		// path gives half of one channel's best.
		q.Ranking = nil
		hits, err = memory.Retrieve(ctx, st, q)
		if err != nil {
			t.Fatal(err)
		}
		rk := memory.LexicalEmbedderRanking
		if hits[0].ID != direct.ID || math.Abs(hits[0].Fused-(rk.Lexical+rk.Vector)) > 1e-9 {
			t.Errorf("score fusion: best %s fused %v, want %s with %v", hits[0].ID, hits[0].Fused, direct.ID, rk.Lexical+rk.Vector)
		}
		for _, h := range hits {
			if h.ID == anchored.ID && math.Abs(h.Activation-memory.AnchorActivation*(memory.RRFK+1)) > 1e-12 {
				t.Errorf("score fusion: anchor activation %v, want %v", h.Activation, memory.AnchorActivation*(memory.RRFK+1))
			}
		}
	})
}

// Pseudo-relevance feedback reaches a memory that shares no word with the
// question through the words the question's answers share.
func TestFeedbackChannel(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		clock := now.Add(-24 * time.Hour)
		st := b.Open(t, storetest.WithClock(func() time.Time { return clock }))
		add := func(label string) string {
			clock = clock.Add(2 * memory.ConversationGap) // not one conversation
			r, err := st.Upsert(ctx, memory.Node{Subkind: memory.Observation, ProjectID: "p1", Label: label})
			if err != nil {
				t.Fatal(err)
			}
			return r.Node.ID
		}
		a := add("Biscuit the greyhound loves the beach at dawn")
		b2 := add("Took Biscuit the greyhound to the vet for his shots")
		c := add("Biscuit chewed the sofa cushions again")
		add("The sofa was delivered on Tuesday")
		q := memory.Query{Text: "greyhound vet", Filter: memory.Filter{ProjectID: "p1"}, Now: now}
		ids := func(rk memory.Ranking) []string {
			q.Ranking = &rk
			hits, err := memory.Retrieve(ctx, st, q)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, h := range hits {
				out = append(out, h.ID)
			}
			return out
		}
		rk := memory.LexicalEmbedderRanking
		rk.Feedback = 0
		if got := ids(rk); slices.Contains(got, c) {
			t.Fatalf("without feedback the chewed sofa came in: %v", got)
		}
		rk.Feedback = 0.5
		got := ids(rk)
		if len(got) < 3 || !slices.Contains(got[:2], a) || !slices.Contains(got[:2], b2) || got[2] != c {
			t.Errorf("with feedback = %v, want %s and %s, then %s through the shared word", got, a, b2, c)
		}
	})
}
