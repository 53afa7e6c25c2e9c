package memorytest

import (
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

var graphTests = []subtest{
	{"Graph/LinkUnlink", testLinkUnlink},
	{"Graph/Neighbours", testNeighbours},
}

func testLinkUnlink(e *env) {
	a := e.upsert(node("p", memory.Decision, "a"))
	b := e.upsert(node("p", memory.Decision, "b"))
	c := e.upsert(node("p", memory.Decision, "c"))
	ed, err := e.s.Link(e.ctx, memory.Edge{Src: a.ID, Dst: b.ID, Relation: memory.RelatesTo})
	e.ok(err, "Link")
	if ed.Weight != 1 || !timeEq(ed.ValidFrom, Epoch) || !ed.Live() || ed.Source != memory.SourceAgent {
		e.t.Fatalf("edge: %+v", ed)
	}
	ed, err = e.s.Link(e.ctx, memory.Edge{Src: a.ID, Dst: b.ID, Relation: memory.RelatesTo})
	e.ok(err, "re-Link")
	if ed.Weight != 1.25 {
		e.t.Fatalf("re-link weight %v", ed.Weight)
	}
	for range 50 {
		ed, err = e.s.Link(e.ctx, memory.Edge{Src: a.ID, Dst: b.ID, Relation: memory.RelatesTo})
		e.ok(err, "re-Link")
	}
	if ed.Weight != memory.MaxWeight {
		e.t.Fatalf("weight cap: %v", ed.Weight)
	}
	_, err = e.s.Link(e.ctx, memory.Edge{Src: a.ID, Dst: a.ID, Relation: memory.RelatesTo})
	e.is(err, memory.ErrInvalid, "self-link")
	_, err = e.s.Link(e.ctx, memory.Edge{Src: a.ID, Dst: b.ID, Relation: "likes"})
	e.is(err, memory.ErrInvalid, "bad relation")
	_, err = e.s.Link(e.ctx, memory.Edge{Src: a.ID, Dst: "nope", Relation: memory.RelatesTo})
	e.is(err, memory.ErrNotFound, "link to unknown")
	_, err = e.s.Link(e.ctx, memory.Edge{Src: c.ID, Dst: a.ID, Relation: memory.CausedBy})
	e.ok(err, "Link")
	// another relation between the same nodes is another edge
	_, err = e.s.Link(e.ctx, memory.Edge{Src: a.ID, Dst: b.ID, Relation: memory.Contradicts})
	e.ok(err, "Link")

	abc := map[string]string{"a": a.ID, "b": b.ID, "c": c.ID}
	edges, err := e.s.Edges(e.ctx, a.ID)
	e.ok(err, "Edges")
	e.sameSet("edges of a", edgeKeys(edges, abc), []string{"a>b:relates_to", "c>a:caused_by", "a>b:contradicts"})

	e.c.Advance(time.Minute)
	e.ok(e.s.Unlink(e.ctx, a.ID, b.ID, memory.RelatesTo), "Unlink")
	e.is(e.s.Unlink(e.ctx, a.ID, b.ID, memory.RelatesTo), memory.ErrNotFound, "Unlink twice")
	e.is(e.s.Unlink(e.ctx, b.ID, c.ID, memory.RelatesTo), memory.ErrNotFound, "Unlink unknown")
	edges, err = e.s.Edges(e.ctx, b.ID)
	e.ok(err, "Edges")
	e.sameSet("edges of b after unlink", edgeKeys(edges, abc), []string{"a>b:contradicts"})
	// the closed edge is kept (Scan) and re-linking starts a new edge
	var closed int
	e.ok(e.s.Scan(e.ctx, func(memory.Node) error { return nil }, func(ed memory.Edge) error {
		if ed.Src == a.ID && ed.Dst == b.ID && ed.Relation == memory.RelatesTo && !ed.Live() {
			closed++
			if !timeEq(ed.ValidTo, e.c.Now()) {
				e.t.Errorf("valid-to %v", ed.ValidTo)
			}
		}
		return nil
	}), "Scan")
	if closed != 1 {
		e.t.Fatalf("closed edges kept: %d", closed)
	}
	ed, err = e.s.Link(e.ctx, memory.Edge{Src: a.ID, Dst: b.ID, Relation: memory.RelatesTo})
	e.ok(err, "Link after unlink")
	if ed.Weight != 1 || !ed.Live() {
		e.t.Fatalf("re-link after unlink: %+v", ed)
	}
	edges, err = e.s.Edges(e.ctx, "unknown")
	e.ok(err, "Edges unknown")
	if len(edges) != 0 {
		e.t.Fatalf("edges of unknown: %v", edges)
	}
}

// edgeKeys names edges as src>dst:relation with the ids replaced by their
// names in byName.
func edgeKeys(edges []memory.Edge, byName map[string]string) []string {
	rev := make(map[string]string, len(byName))
	for k, v := range byName {
		rev[v] = k
	}
	name := func(id string) string {
		if n, ok := rev[id]; ok {
			return n
		}
		return id
	}
	out := make([]string, len(edges))
	for i, ed := range edges {
		out[i] = name(ed.Src) + ">" + name(ed.Dst) + ":" + string(ed.Relation)
	}
	return out
}

func testNeighbours(e *env) {
	// a - b - c - d - e chain, plus a -> x (other session), b -> arch (archived),
	// arch -> y (only reachable through the archived node), b - g (global)
	mk := func(label string) memory.Node { return e.upsert(node("p", memory.Observation, label)) }
	a, b, c, d, ee := mk("a"), mk("b"), mk("c"), mk("d"), mk("e")
	x := e.upsert(memory.Node{Subkind: memory.Observation, Scope: memory.ScopeSession, ProjectID: "p", SessionID: "other", Label: "x"})
	arch, y := mk("arch"), mk("y")
	g := e.upsert(memory.Node{Subkind: memory.Observation, Label: "g"})
	q := e.upsert(node("q", memory.Observation, "q"))
	link := func(s, d memory.Node, w float64) {
		_, err := e.s.Link(e.ctx, memory.Edge{Src: s.ID, Dst: d.ID, Relation: memory.RelatesTo, Weight: w})
		e.ok(err, "Link")
	}
	link(a, b, 1)
	link(c, b, 1) // reverse direction is walked too
	link(c, d, 1)
	link(d, ee, 1)
	link(a, x, 1)
	link(b, arch, 1)
	link(arch, y, 1)
	link(b, g, 5)
	link(a, q, 1) // other project, reach here: hidden
	e.ok(e.s.Archive(e.ctx, arch.ID), "Archive")
	byName := map[string]string{"a": a.ID, "b": b.ID, "c": c.ID, "d": d.ID, "e": ee.ID, "x": x.ID, "arch": arch.ID, "y": y.ID, "g": g.ID, "q": q.ID}
	f := memory.Filter{ProjectID: "p", SessionID: "s"}
	walk := func(hops int) ([]string, []int) {
		e.t.Helper()
		ns, err := e.s.Neighbours(e.ctx, a.ID, hops, f)
		e.ok(err, "Neighbours")
		var got []string
		var depth []int
		for _, n := range ns {
			got = append(got, n.Node.ID)
			depth = append(depth, n.Depth)
			if n.Edge.Src != n.Node.ID && n.Edge.Dst != n.Node.ID {
				e.t.Errorf("edge %+v does not reach %s", n.Edge, n.Node.ID)
			}
		}
		return got, depth
	}
	got, depth := walk(1)
	if !equal(got, []string{b.ID}) || depth[0] != 1 {
		e.t.Fatalf("1 hop: %s %v", names(byName, got), depth)
	}
	got, depth = walk(2)
	if !equal(got, []string{b.ID, g.ID, c.ID}) || !equalInts(depth, []int{1, 2, 2}) {
		e.t.Fatalf("2 hops (heavier edge first at equal depth): %s %v", names(byName, got), depth)
	}
	got, depth = walk(3)
	if !equal(got, []string{b.ID, g.ID, c.ID, d.ID}) || !equalInts(depth, []int{1, 2, 2, 3}) {
		e.t.Fatalf("3 hops: %s %v", names(byName, got), depth)
	}
	// the other session sees x
	ns, err := e.s.Neighbours(e.ctx, a.ID, 1, memory.Filter{ProjectID: "p", SessionID: "other"})
	e.ok(err, "Neighbours")
	var gotIDs []string
	for _, n := range ns {
		gotIDs = append(gotIDs, n.Node.ID)
	}
	e.sameSet("session other", gotIDs, []string{b.ID, x.ID})
	// with archived nodes asked for, the walk goes through arch to y
	ns, err = e.s.Neighbours(e.ctx, a.ID, 3, memory.Filter{ProjectID: "p", SessionID: "s", IncludeArchived: true})
	e.ok(err, "Neighbours")
	gotIDs = nil
	for _, n := range ns {
		gotIDs = append(gotIDs, n.Node.ID)
	}
	e.sameSet("with archived", gotIDs, []string{b.ID, g.ID, c.ID, d.ID, arch.ID, y.ID})
	_, err = e.s.Neighbours(e.ctx, a.ID, 4, f)
	e.is(err, memory.ErrInvalid, "4 hops")
	_, err = e.s.Neighbours(e.ctx, a.ID, 0, f)
	e.is(err, memory.ErrInvalid, "0 hops")
	_, err = e.s.Neighbours(e.ctx, "nope", 1, f)
	e.is(err, memory.ErrNotFound, "unknown start")
	// unlinked edges are not walked
	e.ok(e.s.Unlink(e.ctx, a.ID, b.ID, memory.RelatesTo), "Unlink")
	got, _ = walk(3)
	if len(got) != 0 {
		e.t.Fatalf("walked an unlinked edge: %s", names(byName, got))
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
