package sqlite

import (
	"slices"

	"github.com/engram-memory/engram/pkg/memory"
)

// The index mirrors the live edges (valid_to = 0) by node: retrieval asks
// for the edges of its seeds and of its hits on every turn, and the SQL
// look-up cost more than the rest of the ranking. Writes record what they
// did to edges (wtx.edges) and the index applies it after the commit,
// as it does for nodes; Open loads the live edges.

// edgeChange is one committed write to a live edge.
type edgeChange struct {
	e    memory.Edge // the edge written (with its ends and relation)
	live bool        // true: e is the live edge now; false: the live edge of e's ends and relation with e's valid-from (any valid-from when anyFrom) is gone
	// anyFrom: the closing removes the live edge whatever its valid-from (Unlink).
	anyFrom bool
}

// liveEdge, closedEdge and unlinked are the records of the three kinds of
// edge write. Times go through their stored form so that the mirror holds
// what a query would read.
func liveEdge(e memory.Edge) edgeChange   { return edgeChange{e: storedEdge(e), live: true} }
func closedEdge(e memory.Edge) edgeChange { return edgeChange{e: storedEdge(e)} }
func unlinked(src, dst string, rel memory.Relation) edgeChange {
	return edgeChange{e: memory.Edge{Src: src, Dst: dst, Relation: rel}, anyFrom: true}
}

func storedEdge(e memory.Edge) memory.Edge {
	e.ValidFrom, e.ValidTo = fromNanos(nanos(e.ValidFrom)), fromNanos(nanos(e.ValidTo))
	return e
}

func sameEdge(a, b *memory.Edge) bool {
	return a.Src == b.Src && a.Dst == b.Dst && a.Relation == b.Relation
}

// applyEdges mirrors committed edge writes (x.mu write-held).
func (x *index) applyEdges(changes []edgeChange) {
	for _, c := range changes {
		for _, end := range []string{c.e.Src, c.e.Dst} {
			list := x.edges[end]
			i := slices.IndexFunc(list, func(o memory.Edge) bool { return sameEdge(&o, &c.e) })
			switch {
			case c.live && i >= 0:
				list[i] = c.e
			case c.live:
				list = append(list, c.e)
			case i >= 0 && (c.anyFrom || list[i].ValidFrom.Equal(c.e.ValidFrom)):
				list = slices.Delete(list, i, i+1)
			}
			if len(list) == 0 {
				delete(x.edges, end)
			} else {
				x.edges[end] = list
			}
			if c.e.Src == c.e.Dst {
				break // a self-loop is listed once
			}
		}
	}
}

// edgesOf returns copies of the live edges touching each of ids (x.mu held).
func (x *index) edgesOf(ids []string) map[string][]memory.Edge {
	out := make(map[string][]memory.Edge, len(ids))
	for _, id := range ids {
		if _, done := out[id]; done {
			continue
		}
		if list := x.edges[id]; len(list) > 0 {
			out[id] = slices.Clone(list)
		}
	}
	return out
}
