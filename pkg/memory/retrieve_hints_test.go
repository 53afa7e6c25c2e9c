package memory

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// hintStore is a RetrievalStore with ContradictionHints over fixed nodes
// and edges: the lexical channel returns every node in id order, and it
// records the ids of each EdgesOf call.
type hintStore struct {
	nodes []Node
	edges []Edge
	hints map[string]bool // MayContradict's answers (ids not in it are unknown)

	mu      sync.Mutex
	edgeIDs [][]string
}

func (s *hintStore) Lexical(_ context.Context, _ []string, _ Filter, _ int) ([]Scored, error) {
	out := make([]Scored, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = Scored{ID: n.ID, Score: float64(len(s.nodes) - i)}
	}
	return out, nil
}

func (s *hintStore) Vector(context.Context, string, []float32, Filter, int) ([]Scored, error) {
	return nil, nil
}

func (s *hintStore) ByPaths(context.Context, []string, Filter, int) ([]Scored, error) {
	return nil, nil
}

func (s *hintStore) GetMany(_ context.Context, ids []string) ([]Node, error) {
	var out []Node
	for _, n := range s.nodes {
		if slices.Contains(ids, n.ID) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (s *hintStore) EdgesOf(_ context.Context, ids []string) (map[string][]Edge, error) {
	s.mu.Lock()
	s.edgeIDs = append(s.edgeIDs, slices.Sorted(slices.Values(ids)))
	s.mu.Unlock()
	out := map[string][]Edge{}
	for _, e := range s.edges {
		for _, id := range []string{e.Src, e.Dst} {
			if slices.Contains(ids, id) {
				out[id] = append(out[id], e)
			}
		}
	}
	return out, nil
}

func (s *hintStore) MayContradict(_ context.Context, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, id := range ids {
		if v, ok := s.hints[id]; ok {
			out[id] = v
		}
	}
	return out, nil
}

// With hints, the contradiction check reads the edges of the hits that may
// contradict, and nothing when fewer than two may; a hit the hints do not
// know is read.
func TestContradictionHintsLimitTheEdgeRead(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	node := func(id string, by Authority) Node {
		return Node{ID: id, ProjectID: "p", Scope: ScopeProject, Subkind: Observation, Confidence: 0.9,
			AssertedBy: by, Weight: 1, UpdatedAt: now}
	}
	nodes := []Node{node("a", AssertedInferred), node("b", AssertedUser), node("c", AssertedAssistant), node("d", AssertedAssistant)}
	edges := []Edge{{Src: "a", Dst: "b", Relation: Contradicts, ValidFrom: now.Add(-time.Hour)}}
	q := Query{Text: "anything at all", Filter: Filter{ProjectID: "p"}, Now: now}
	cases := []struct {
		name     string
		noCap    bool // the store has no ContradictionHints
		hints    map[string]bool
		wantRead [][]string // the ids of each EdgesOf call
		wantHits []string
	}{
		{"without the capability every hit is read", true, nil, [][]string{{"a", "b", "c", "d"}}, []string{"b", "c", "d"}},
		{"every hit may contradict", false, map[string]bool{"a": true, "b": true, "c": true, "d": true},
			[][]string{{"a", "b", "c", "d"}}, []string{"b", "c", "d"}},
		{"the two ends are read", false, map[string]bool{"a": true, "b": true, "c": false, "d": false},
			[][]string{{"a", "b"}}, []string{"b", "c", "d"}},
		{"an unknown hit is read", false, map[string]bool{"a": true, "b": true, "c": false},
			[][]string{{"a", "b", "d"}}, []string{"b", "c", "d"}},
		// A wrong "no" is the store's bug; shown here to prove nothing was read.
		{"fewer than two maybes: no read", false, map[string]bool{"a": true, "b": false, "c": false, "d": false},
			nil, []string{"a", "b", "c", "d"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &hintStore{nodes: nodes, edges: edges, hints: c.hints}
			var rs RetrievalStore = st
			if c.noCap {
				rs = struct{ RetrievalStore }{st} // hides MayContradict
			}
			hits, err := Retrieve(context.Background(), rs, q)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hits {
				got = append(got, h.ID)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.wantHits) {
				t.Errorf("hits %v, want %v", got, c.wantHits)
			}
			if !slices.EqualFunc(st.edgeIDs, c.wantRead, slices.Equal[[]string]) {
				t.Errorf("EdgesOf calls %v, want %v", st.edgeIDs, c.wantRead)
			}
		})
	}
}

// A contradiction is settled only when both of its ends are in the results
// (the first Limit hits still standing): a loser whose winner ranks below
// them stays, and a dropped loser lets the next hit in, which may settle
// another pair.
func TestContradictionsSettledWithinTheResults(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	node := func(id string, by Authority) Node {
		return Node{ID: id, ProjectID: "p", Scope: ScopeProject, Subkind: Observation, Confidence: 0.9,
			AssertedBy: by, Weight: 1, UpdatedAt: now}
	}
	// Ranked a, b, c, d, e (the lexical channel's order, equal priors).
	nodes := []Node{node("a", AssertedInferred), node("b", AssertedAssistant), node("c", AssertedAssistant),
		node("d", AssertedUser), node("e", AssertedUser)}
	contra := func(src, dst string) Edge {
		return Edge{Src: src, Dst: dst, Relation: Contradicts, ValidFrom: now.Add(-time.Hour)}
	}
	cases := []struct {
		name  string
		limit int
		edges []Edge
		want  []string
	}{
		{"winner below the results: the loser stays", 2, []Edge{contra("a", "c")}, []string{"a", "b"}},
		{"winner in the results: the loser goes", 3, []Edge{contra("a", "c")}, []string{"b", "c", "d"}},
		{"both ends in the results", 2, []Edge{contra("b", "a")}, []string{"b", "c"}},
		// c and d are both in the results once a (beaten by b) has made
		// room for d, and d wins.
		{"a drop brings the next pair in", 3, []Edge{contra("a", "b"), contra("c", "d")}, []string{"b", "d", "e"}},
		{"a closed edge settles nothing", 2, []Edge{{Src: "b", Dst: "a", Relation: Contradicts,
			ValidFrom: now.Add(-2 * time.Hour), ValidTo: now.Add(-time.Hour)}}, []string{"a", "b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &hintStore{nodes: nodes, edges: c.edges}
			hits, err := Retrieve(context.Background(), st, Query{Text: "anything at all", Filter: Filter{ProjectID: "p"}, Now: now, Limit: c.limit})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hits {
				got = append(got, h.ID)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("hits %v, want %v", got, c.want)
			}
		})
	}
}
