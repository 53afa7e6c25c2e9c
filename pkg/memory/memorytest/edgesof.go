package memorytest

import (
	"slices"
	"sort"

	"github.com/engram-memory/engram/pkg/memory"
)

var edgesOfTests = []subtest{
	{"EdgesOf/AgreesWithEdges", func(e *env) {
		a := e.upsert(node("p1", memory.Decision, "alpha decision"))
		b := e.upsert(node("p1", memory.Pattern, "beta pattern"))
		c := e.upsert(node("p1", memory.Failure, "gamma failure"))
		g := e.upsert(memory.Node{Subkind: memory.Observation, Scope: memory.ScopeGlobal, Label: "global delta"})
		lonely := e.upsert(node("p1", memory.Observation, "no edges at all"))
		for _, ed := range []memory.Edge{
			{Src: a.ID, Dst: b.ID, Relation: memory.RelatesTo},
			{Src: b.ID, Dst: c.ID, Relation: memory.CausedBy},
			{Src: c.ID, Dst: a.ID, Relation: memory.Contradicts},
			{Src: a.ID, Dst: g.ID, Relation: memory.About},
		} {
			_, err := e.s.Link(e.ctx, ed)
			e.ok(err, "Link")
		}
		// A closed edge is not listed.
		_, err := e.s.Link(e.ctx, memory.Edge{Src: b.ID, Dst: g.ID, Relation: memory.RelatedTo})
		e.ok(err, "Link")
		e.ok(e.s.Unlink(e.ctx, b.ID, g.ID, memory.RelatedTo), "Unlink")

		ids := []string{a.ID, b.ID, c.ID, g.ID, lonely.ID, "no-such-node", a.ID}
		got, err := e.s.EdgesOf(e.ctx, ids)
		e.ok(err, "EdgesOf")
		key := func(x memory.Edge) string { return x.Src + ">" + x.Dst + ":" + string(x.Relation) }
		for _, id := range []string{a.ID, b.ID, c.ID, g.ID} {
			want, err := e.s.Edges(e.ctx, id)
			e.ok(err, "Edges")
			var wk, gk []string
			for _, x := range want {
				wk = append(wk, key(x))
			}
			for _, x := range got[id] {
				gk = append(gk, key(x))
				if !x.Live() {
					e.t.Errorf("EdgesOf(%s) lists a closed edge %s", id, key(x))
				}
			}
			sort.Strings(wk)
			sort.Strings(gk)
			if !slices.Equal(wk, gk) {
				e.t.Errorf("EdgesOf[%s] = %v, Edges = %v", id, gk, wk)
			}
		}
		if _, ok := got[lonely.ID]; ok {
			e.t.Errorf("a node without edges is in the map")
		}
		if _, ok := got["no-such-node"]; ok {
			e.t.Errorf("an unknown id is in the map")
		}
		if len(got[a.ID]) != 3 {
			e.t.Errorf("a has %d live edges, want 3", len(got[a.ID]))
		}
		empty, err := e.s.EdgesOf(e.ctx, nil)
		e.ok(err, "EdgesOf(nil)")
		if len(empty) != 0 {
			e.t.Errorf("EdgesOf(nil) = %v", empty)
		}
	}},
	{"ContradictionHints/EveryEndIsAMaybe", func(e *env) {
		h, ok := e.s.(memory.ContradictionHints)
		if !ok {
			e.t.Skip("the store has no ContradictionHints (optional)")
		}
		a := e.upsert(node("p1", memory.Decision, "alpha decision"))
		b := e.upsert(node("p1", memory.Pattern, "beta pattern"))
		c := e.upsert(node("p2", memory.Failure, "gamma failure elsewhere"))
		g := e.upsert(memory.Node{Subkind: memory.Observation, Scope: memory.ScopeGlobal, Label: "global delta"})
		plain := e.upsert(node("p1", memory.Observation, "related, never contradicted"))
		for _, ed := range []memory.Edge{
			{Src: a.ID, Dst: b.ID, Relation: memory.Contradicts},
			{Src: c.ID, Dst: a.ID, Relation: memory.Contradicts}, // across projects
			{Src: g.ID, Dst: b.ID, Relation: memory.Contradicts}, // global to project
			{Src: plain.ID, Dst: a.ID, Relation: memory.RelatesTo},
		} {
			_, err := e.s.Link(e.ctx, ed)
			e.ok(err, "Link")
		}
		got, err := h.MayContradict(e.ctx, []string{a.ID, b.ID, c.ID, g.ID, plain.ID, "no-such-node"})
		e.ok(err, "MayContradict")
		// A "no" is a promise; a "maybe" (or no answer) is always allowed.
		for _, id := range []string{a.ID, b.ID, c.ID, g.ID} {
			if maybe, asked := got[id]; asked && !maybe {
				e.t.Errorf("MayContradict says %s is surely not an end of a contradicts edge, but it is", id)
			}
		}
		empty, err := h.MayContradict(e.ctx, nil)
		e.ok(err, "MayContradict(nil)")
		if len(empty) != 0 {
			e.t.Errorf("MayContradict(nil) = %v", empty)
		}
	}},
}
