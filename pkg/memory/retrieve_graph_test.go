package memory

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
	"time"
)

// graphStore is a RetrievalStore over fixed nodes and edges: the lexical
// channel answers lex in that order, the path channel the nodes attached
// to any path it is asked about, the vector channel nothing.
type graphStore struct {
	hintStore
	lex        []string
	askedPaths []string
}

func (s *graphStore) Lexical(context.Context, []string, Filter, int) ([]Scored, error) {
	out := make([]Scored, len(s.lex))
	for i, id := range s.lex {
		out[i] = Scored{ID: id, Score: float64(len(s.lex) - i)}
	}
	return out, nil
}

func (s *graphStore) ByPaths(_ context.Context, paths []string, _ Filter, _ int) ([]Scored, error) {
	s.askedPaths = slices.Clone(paths)
	var out []Scored
	for _, n := range s.nodes {
		for _, p := range n.Paths {
			if slices.Contains(paths, p) {
				out = append(out, Scored{ID: n.ID, Score: 1})
				break
			}
		}
	}
	return out, nil
}

// rrfRanking is reciprocal-rank fusion with the profile weights as they
// are and the whole prior: the units in which the hop's rules are stated.
var rrfRanking = Ranking{Fusion: FuseRanks, Lexical: 0.8, Vector: 1.2, Prior: 1}

// TestGraphExpansion pins the hop's rules: the top 6 direct hits seed it,
// each with mass max(fused score, 1/120); a seed passes mass x 0.45 split
// evenly over at most 24 eligible neighbours; a neighbour that is a direct
// hit adds the mass to its score; graph-reached nodes score activation x
// prior; anchor paths are the last 40.
func TestGraphExpansion(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	node := func(id string, paths ...string) Node { // prior 1
		return Node{ID: id, ProjectID: "p", Scope: ScopeProject, Subkind: Observation, Confidence: 1,
			AssertedBy: AssertedUser, Weight: 1, UpdatedAt: now, Paths: paths}
	}
	link := func(a, b string) Edge {
		return Edge{Src: a, Dst: b, Relation: RelatesTo, Weight: 1, ValidFrom: now.Add(-time.Hour)}
	}
	lw, _ := QueryProfile("anything at all").Weights()
	fused := func(rank int) float64 { return lw / (RRFK + float64(rank)) }
	run := func(t *testing.T, st *graphStore, q Query) map[string]Hit {
		t.Helper()
		q.Filter, q.Now, q.Expand = Filter{ProjectID: "p"}, now, true
		if q.Ranking == nil {
			q.Ranking = &rrfRanking // the rules in reciprocal-rank units
		}
		if q.Limit == 0 {
			q.Limit = 100
		}
		hits, err := Retrieve(context.Background(), st, q)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]Hit{}
		for _, h := range hits {
			got[h.ID] = h
		}
		return got
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

	t.Run("six seeds", func(t *testing.T) {
		st := &graphStore{}
		for i := 1; i <= 8; i++ {
			d, n := fmt.Sprintf("d%d", i), fmt.Sprintf("n%d", i)
			st.nodes = append(st.nodes, node(d), node(n))
			st.edges = append(st.edges, link(d, n))
			st.lex = append(st.lex, d)
		}
		got := run(t, st, Query{Text: "anything at all"})
		for i := 1; i <= 8; i++ {
			h, ok := got[fmt.Sprintf("n%d", i)]
			if i > ExpansionSeeds {
				if ok {
					t.Errorf("n%d reached from the %dth hit, which is not a seed", i, i)
				}
				continue
			}
			if want := fused(i) * ExpansionDecay; !ok || !h.Graph || !near(h.Activation, want) || !near(h.Score, want) {
				t.Errorf("n%d = %+v, want graph-reached with activation and score %v", i, h, want)
			}
		}
	})
	t.Run("at most 24 neighbours, mass split evenly", func(t *testing.T) {
		st := &graphStore{lex: []string{"hub"}, hintStore: hintStore{nodes: []Node{node("hub")}}}
		for i := range 30 {
			id := fmt.Sprintf("m%02d", i)
			st.nodes = append(st.nodes, node(id))
			st.edges = append(st.edges, link("hub", id))
		}
		got := run(t, st, Query{Text: "anything at all"})
		reached := 0
		for id, h := range got {
			if id == "hub" {
				continue
			}
			reached++
			if want := fused(1) * ExpansionDecay / ExpansionFanout; !near(h.Activation, want) {
				t.Errorf("%s activation %v, want %v", id, h.Activation, want)
			}
		}
		if reached != ExpansionFanout {
			t.Errorf("%d neighbours reached, want %d", reached, ExpansionFanout)
		}
	})
	t.Run("a direct hit adds the mass", func(t *testing.T) {
		st := &graphStore{lex: []string{"a", "b"}, hintStore: hintStore{nodes: []Node{node("a"), node("b")},
			edges: []Edge{link("a", "b")}}}
		got := run(t, st, Query{Text: "anything at all"})
		a, b := got["a"], got["b"]
		if b.Graph || !near(b.Activation, fused(1)*ExpansionDecay) || !near(b.Score, fused(2)+fused(1)*ExpansionDecay) {
			t.Errorf("b = %+v, want its fused score plus a's mass", b)
		}
		// Masses come from the direct scores, before any graph mass lands.
		if !near(a.Activation, fused(2)*ExpansionDecay) || !near(a.Score, fused(1)+fused(2)*ExpansionDecay) {
			t.Errorf("a = %+v, want its fused score plus b's mass", a)
		}
	})
	t.Run("a path-only seed passes 1/120 of mass", func(t *testing.T) {
		st := &graphStore{hintStore: hintStore{nodes: []Node{node("anchored", "web/app.ts"), node("linked")},
			edges: []Edge{link("anchored", "linked")}}}
		got := run(t, st, Query{Text: "ok", TextMin: 8, AnchorPaths: []string{"web/app.ts"}})
		if h := got["anchored"]; !h.Path || !near(h.Activation, AnchorActivation) {
			t.Errorf("anchored = %+v, want activation 1/120", h)
		}
		if h := got["linked"]; !h.Graph || !near(h.Activation, AnchorActivation*ExpansionDecay) {
			t.Errorf("linked = %+v, want activation 0.45/120", h)
		}
	})
	t.Run("the last 40 anchor paths", func(t *testing.T) {
		var paths []string
		for i := range 45 {
			paths = append(paths, fmt.Sprintf("src/f%02d.go", i))
		}
		st := &graphStore{hintStore: hintStore{nodes: []Node{node("oldest", paths[4]), node("newest", paths[5])}}}
		got := run(t, st, Query{Text: "ok", TextMin: 8, AnchorPaths: paths})
		if !slices.Equal(st.askedPaths, paths[5:]) {
			t.Errorf("paths asked %v, want the last %d", st.askedPaths, MaxAnchorPaths)
		}
		if _, ok := got["oldest"]; ok {
			t.Errorf("a memory on the 41st most recent path was recalled")
		}
		if _, ok := got["newest"]; !ok {
			t.Errorf("a memory on the 40th most recent path was not recalled")
		}
	})
}

// scorerStore is a graphStore whose vector channel answers vec (an
// approximate search that missed some nodes) and which scores any node
// exactly from cos.
type scorerStore struct {
	graphStore
	vec    []Scored
	cos    map[string]float64
	scored []string // the ids VectorScores was asked about
}

func (s *scorerStore) Vector(context.Context, string, []float32, Filter, int) ([]Scored, error) {
	return slices.Clone(s.vec), nil
}

func (s *scorerStore) VectorScores(_ context.Context, _ string, _ []float32, ids []string) ([]Scored, error) {
	s.scored = append(s.scored, ids...)
	var out []Scored
	for _, id := range ids {
		if c, ok := s.cos[id]; ok {
			out = append(out, Scored{ID: id, Score: c})
		}
	}
	return out, nil
}

// TestLexicalCandidatesRescored: the lexical candidates the vector search
// missed are scored exactly and ranked in the vector channel by cosine; a
// negative cosine stays out, as the channel returns positive ones only; the
// precise cut comes from the search's own sample.
func TestLexicalCandidatesRescored(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	node := func(id string) Node {
		return Node{ID: id, ProjectID: "p", Scope: ScopeProject, Subkind: Observation, Confidence: 1,
			AssertedBy: AssertedUser, Weight: 1, UpdatedAt: now}
	}
	mk := func() *scorerStore {
		st := &scorerStore{cos: map[string]float64{"lexA": 0.9, "lexB": 0.15, "lexC": -0.2, "v1": 0.5, "v2": 0.3}}
		st.nodes = []Node{node("lexA"), node("lexB"), node("lexC"), node("v1"), node("v2")}
		st.lex = []string{"lexA", "lexB", "lexC", "v2"}
		st.vec = []Scored{{ID: "v1", Score: 0.5}, {ID: "v2", Score: 0.3}}
		return st
	}
	q := Query{Text: "anything at all", Vector: []float32{1}, Model: "m", Filter: Filter{ProjectID: "p"}, Now: now,
		Ranking: &SemanticEmbedderRanking}
	st := mk()
	hits, err := Retrieve(context.Background(), st, q)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(st.scored)); !slices.Equal(got, []string{"lexA", "lexB", "lexC"}) {
		t.Errorf("scored %v, want the lexical candidates the vector channel missed", got)
	}
	vecRank := map[string]int{}
	for _, h := range hits {
		vecRank[h.ID] = h.Vector
	}
	if want := map[string]int{"lexA": 1, "v1": 2, "v2": 3, "lexB": 4, "lexC": 0}; !maps.Equal(vecRank, want) {
		t.Errorf("vector ranks %v, want %v", vecRank, want)
	}

	// Only the leading lexical candidates are scored.
	st = mk()
	st.lex = nil
	for i := range 25 {
		id := fmt.Sprintf("l%02d", i)
		st.nodes = append(st.nodes, node(id))
		st.lex = append(st.lex, id)
	}
	if _, err := Retrieve(context.Background(), st, q); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(st.scored)); !slices.Equal(got, st.lex[:rescoreDepth]) {
		t.Errorf("scored %v, want the first %d lexical candidates", got, rescoreDepth)
	}

	// Precise: the cut is max(mean + 1 sd, 0.35) of the search's sample
	// (eight answers, cut 0.39; over the rescored channel it would be 0.56
	// and drop v1), applied to the rescored channel.
	st = mk()
	st.vec = nil
	for i, s := range []float64{0.5, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3} {
		id := fmt.Sprintf("v%d", i+1)
		st.vec = append(st.vec, Scored{ID: id, Score: s})
		if i > 1 {
			st.nodes = append(st.nodes, node(id))
		}
	}
	q.Precise = true
	hits, err = Retrieve(context.Background(), st, q)
	if err != nil {
		t.Fatal(err)
	}
	vecRank = map[string]int{}
	for _, h := range hits {
		if h.Vector > 0 {
			vecRank[h.ID] = h.Vector
		}
	}
	if want := map[string]int{"lexA": 1, "v1": 2}; !maps.Equal(vecRank, want) {
		t.Errorf("precise vector ranks %v, want %v", vecRank, want)
	}

	// A vector weight of 0 (the hashing embedder's ranking) searches and
	// scores nothing in that channel: v1 and v2, found only by it, are not
	// candidates.
	st = mk()
	q.Precise, q.Ranking = false, &LexicalEmbedderRanking
	hits, err = Retrieve(context.Background(), st, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.scored) > 0 {
		t.Errorf("vector weight 0: scored %v, want nothing", st.scored)
	}
	for _, h := range hits {
		if h.Vector > 0 || h.ID == "v1" {
			t.Errorf("vector weight 0: hit %+v comes from the vector channel", h)
		}
	}
}
