package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

const edgeCols = `src, dst, relation, weight, source, valid_from, valid_to`

func scanEdge(r scanner) (memory.Edge, error) {
	var e memory.Edge
	var from, to int64
	if err := r.Scan(&e.Src, &e.Dst, &e.Relation, &e.Weight, &e.Source, &from, &to); err != nil {
		return memory.Edge{}, err
	}
	e.ValidFrom = fromNanos(from)
	e.ValidTo = fromNanos(to)
	return e, nil
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// link creates or reinforces a live edge (both ends must exist).
func (w *wtx) link(e memory.Edge) (memory.Edge, error) {
	e, err := memory.PrepareEdge(e, w.now)
	if err != nil {
		return memory.Edge{}, err
	}
	var ends [2]memory.Node
	for i, end := range []string{e.Src, e.Dst} {
		n, _, err := w.get(end)
		if err != nil {
			return memory.Edge{}, fmt.Errorf("link %s -> %s: %w", e.Src, e.Dst, err)
		}
		ends[i] = n
	}
	if err := memory.CheckSameTenant(ends[0], ends[1]); err != nil {
		return memory.Edge{}, fmt.Errorf("link %s -> %s: %w", e.Src, e.Dst, err)
	}
	var eid int64
	old, err := scanEdgeID(w.tx.QueryRowContext(w.ctx, `SELECT eid, `+edgeCols+` FROM edges WHERE src = ? AND dst = ? AND relation = ? AND valid_to = 0`,
		e.Src, e.Dst, e.Relation), &eid)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = w.exec(`INSERT INTO edges(src, dst, relation, weight, source, valid_from, valid_to) VALUES (?, ?, ?, ?, ?, ?, 0)`,
			e.Src, e.Dst, e.Relation, e.Weight, e.Source, nanos(e.ValidFrom))
		w.edges = append(w.edges, liveEdge(e))
		return e, err
	case err != nil:
		return memory.Edge{}, fmt.Errorf("sqlite: link: %w", err)
	}
	e = memory.Relink(old, e)
	_, err = w.exec(`UPDATE edges SET weight = ?, source = ? WHERE eid = ?`, e.Weight, e.Source, eid)
	w.edges = append(w.edges, liveEdge(e))
	return e, err
}

func scanEdgeID(r scanner, eid *int64) (memory.Edge, error) {
	var e memory.Edge
	var from, to int64
	if err := r.Scan(eid, &e.Src, &e.Dst, &e.Relation, &e.Weight, &e.Source, &from, &to); err != nil {
		return memory.Edge{}, err
	}
	e.ValidFrom, e.ValidTo = fromNanos(from), fromNanos(to)
	return e, nil
}

// putEdge writes an edge as given (PutBatch): it replaces the edge with the
// same ends, relation and valid-from, or the live one of the same ends and
// relation when e is live.
func (w *wtx) putEdge(e memory.Edge) error {
	if e.ValidTo.IsZero() {
		w.edges = append(w.edges, liveEdge(e))
	} else {
		w.edges = append(w.edges, closedEdge(e))
	}
	var eid int64
	err := w.tx.QueryRowContext(w.ctx, `SELECT eid FROM edges WHERE src = ? AND dst = ? AND relation = ? AND (valid_from = ? OR (valid_to = 0 AND ? = 0))
		ORDER BY valid_to LIMIT 1`, e.Src, e.Dst, e.Relation, nanos(e.ValidFrom), nanos(e.ValidTo)).Scan(&eid)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = w.exec(`INSERT INTO edges(src, dst, relation, weight, source, valid_from, valid_to) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			e.Src, e.Dst, e.Relation, e.Weight, e.Source, nanos(e.ValidFrom), nanos(e.ValidTo))
		return err
	case err != nil:
		return fmt.Errorf("sqlite: put edge: %w", err)
	}
	_, err = w.exec(`UPDATE edges SET weight = ?, source = ?, valid_from = ?, valid_to = ? WHERE eid = ?`,
		e.Weight, e.Source, nanos(e.ValidFrom), nanos(e.ValidTo), eid)
	return err
}

// Link implements memory.Graph.
func (s *Store) Link(ctx context.Context, e memory.Edge) (memory.Edge, error) {
	var out memory.Edge
	err := s.write(ctx, func(w *wtx) error {
		var err error
		out, err = w.link(e)
		return err
	})
	return out, err
}

// Unlink implements memory.Graph.
func (s *Store) Unlink(ctx context.Context, src, dst string, rel memory.Relation) error {
	return s.write(ctx, func(w *wtx) error {
		r, err := w.exec(`UPDATE edges SET valid_to = ? WHERE src = ? AND dst = ? AND relation = ? AND valid_to = 0`, nanos(w.now), src, dst, rel)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return fmt.Errorf("edge %s -%s-> %s: %w", src, rel, dst, memory.ErrNotFound)
		}
		w.edges = append(w.edges, unlinked(src, dst, rel))
		return nil
	})
}

// Edges implements memory.Graph.
func (s *Store) Edges(ctx context.Context, id string) ([]memory.Edge, error) {
	return s.liveEdges(ctx, id)
}

func (s *Store) liveEdges(ctx context.Context, id string) ([]memory.Edge, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+edgeCols+` FROM edges WHERE src = ? AND valid_to = 0
		UNION ALL SELECT `+edgeCols+` FROM edges WHERE dst = ? AND valid_to = 0`, id, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: edges: %w", err)
	}
	defer rows.Close()
	var out []memory.Edge
	for rows.Next() {
		e, err := scanEdge(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: edges: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: edges: %w", err)
	}
	return out, nil
}

// Neighbours implements memory.Graph: a breadth-first walk over live edges
// in both directions through nodes that pass the filter.
func (s *Store) Neighbours(ctx context.Context, id string, hops int, f memory.Filter) ([]memory.Neighbour, error) {
	if err := memory.CheckHops(hops); err != nil {
		return nil, err
	}
	s.idx.mu.RLock()
	_, known := s.idx.byID[id]
	s.idx.mu.RUnlock()
	if !known {
		return nil, fmt.Errorf("node %s: %w", id, memory.ErrNotFound)
	}
	now := s.now()
	seen := map[string]bool{id: true}
	frontier := []string{id}
	type reached struct {
		id    string
		edge  memory.Edge
		depth int
	}
	var found []reached
	for depth := 1; depth <= hops && len(frontier) > 0; depth++ {
		best := map[string]memory.Edge{}
		for _, from := range frontier {
			edges, err := s.liveEdges(ctx, from)
			if err != nil {
				return nil, err
			}
			for _, e := range edges {
				other := e.Dst
				if other == from {
					other = e.Src
				}
				if seen[other] {
					continue
				}
				if cur, ok := best[other]; !ok || e.Weight > cur.Weight {
					best[other] = e
				}
			}
		}
		var level []reached
		s.idx.mu.RLock()
		gf := s.idx.compile(&f, now)
		for other, e := range best {
			seen[other] = true
			rid, ok := s.idx.byID[other]
			if !ok {
				continue
			}
			if s.idx.pass(rid, &gf) {
				level = append(level, reached{other, e, depth})
			}
		}
		s.idx.mu.RUnlock()
		slices.SortFunc(level, func(a, b reached) int {
			if a.edge.Weight != b.edge.Weight {
				if a.edge.Weight > b.edge.Weight {
					return -1
				}
				return 1
			}
			return strings.Compare(a.id, b.id)
		})
		frontier = frontier[:0]
		for _, r := range level {
			frontier = append(frontier, r.id)
		}
		found = append(found, level...)
	}
	ids := make([]string, len(found))
	for i, r := range found {
		ids[i] = r.id
	}
	nodes, err := s.fetch(ctx, `id`, anySlice(ids))
	if err != nil {
		return nil, err
	}
	out := make([]memory.Neighbour, 0, len(found))
	for _, r := range found {
		if n, ok := nodes[r.id]; ok {
			out = append(out, memory.Neighbour{Node: n, Edge: r.edge, Depth: r.depth})
		}
	}
	return out, nil
}
