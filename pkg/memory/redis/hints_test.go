package redis_test

import (
	"maps"
	"reflect"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// The contradiction hints name every end of a contradicts edge (closed
// ones too), across projects and the global tag, and a project without
// complete hints (data from before them) answers "maybe" for all its
// nodes until EnsureContradictionHints completes it.
func TestContradictionHints(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	add := func(project, label string) memory.Node {
		t.Helper()
		n := memory.Node{Subkind: memory.Observation, Scope: memory.ScopeProject, ProjectID: project, Label: label, Confidence: 0.9}
		if project == "" {
			n.Scope = memory.ScopeGlobal
		}
		r, err := s.Upsert(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		return r.Node
	}
	link := func(a, b memory.Node, rel memory.Relation) {
		t.Helper()
		if _, err := s.Link(ctx, memory.Edge{Src: a.ID, Dst: b.ID, Relation: rel}); err != nil {
			t.Fatal(err)
		}
	}
	a, b, cc := add("p", "alpha"), add("p", "beta"), add("p", "gamma")
	d := add("q", "delta in another project")
	g, g2 := add("", "global epsilon"), add("", "global zeta")
	closed, other := add("p", "eta, once contradicted"), add("p", "theta")
	link(a, b, memory.Contradicts)
	link(b, cc, memory.RelatesTo)
	link(d, a, memory.Contradicts) // across projects: d's out-copy in q, a's in-copy in p
	link(g, cc, memory.Contradicts)
	link(closed, other, memory.Contradicts)
	if err := s.Unlink(ctx, closed.ID, other.ID, memory.Contradicts); err != nil {
		t.Fatal(err)
	}
	ids := []string{a.ID, b.ID, cc.ID, d.ID, g.ID, g2.ID, closed.ID, other.ID, "no-such-node"}
	check := func(what string, want map[string]bool) {
		t.Helper()
		got, err := s.MayContradict(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: MayContradict = %v, want %v", what, got, want)
		}
	}
	exact := map[string]bool{a.ID: true, b.ID: true, cc.ID: true, d.ID: true, g.ID: true, g2.ID: false,
		closed.ID: true, other.ID: true}
	// Projects p and q were registered with complete hints; the global tag
	// has them once EnsureContradictionHints has run (app.OpenStore runs it).
	before := maps.Clone(exact)
	before[g2.ID] = true
	check("before EnsureContradictionHints", before)
	if err := s.EnsureContradictionHints(ctx); err != nil {
		t.Fatal(err)
	}
	check("after EnsureContradictionHints", exact)

	// Without project p's hints (data from before them) p's nodes are all
	// maybes; EnsureContradictionHints rebuilds them from the edges.
	unlinked := add("p", "iota, never linked")
	ids = append(ids, unlinked.ID)
	exact[unlinked.ID] = false
	check("a node without edges", exact)
	if err := c.Del(ctx, redis.ContradictionHintsKey(s, "p")).Err(); err != nil {
		t.Fatal(err)
	}
	legacy := maps.Clone(exact)
	for _, n := range []memory.Node{a, b, cc, closed, other, unlinked} {
		legacy[n.ID] = true
	}
	check("project p without hints", legacy)
	if err := s.EnsureContradictionHints(ctx); err != nil {
		t.Fatal(err)
	}
	check("project p rebuilt", exact)
}

// GetHeadsHinted answers what GetHeads and MayContradict answer, at the
// latest format (one pipeline) and at the base one (two reads).
func TestGetHeadsHintedMatches(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	ids := formatNodes(t, s)
	if _, err := s.Link(ctx, memory.Edge{Src: ids[0], Dst: ids[1], Relation: memory.Contradicts}); err != nil {
		t.Fatal(err)
	}
	ask := []string{ids[3], ids[0], "nope", ids[1], ids[2], ids[0]}
	check := func(at string) {
		t.Helper()
		heads, err := s.GetHeads(ctx, ask)
		if err != nil {
			t.Fatal(err)
		}
		hints, err := s.MayContradict(ctx, ask)
		if err != nil {
			t.Fatal(err)
		}
		gotHeads, gotHints, err := s.GetHeadsHinted(ctx, ask)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotHeads, heads) || !reflect.DeepEqual(gotHints, hints) {
			t.Fatalf("%s: GetHeadsHinted = %+v, %v; want %+v, %v", at, gotHeads, gotHints, heads, hints)
		}
		if !hints[ids[0]] || !hints[ids[1]] || hints[ids[2]] || hints[ids[3]] || len(hints) != 4 || len(heads) != 4 {
			t.Fatalf("%s: hints %v, %d heads", at, hints, len(heads))
		}
	}
	check("latest format")
	if err := s.SetFormat(ctx, redis.FormatBase); err != nil {
		t.Fatal(err)
	}
	check("base format")
}
