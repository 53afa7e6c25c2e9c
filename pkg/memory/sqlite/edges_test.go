package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// TestEdgeMirrorMatchesTable: after random links, relinks, unlinks and
// batch writes of live and closed edges, EdgesOf (served from the index's
// mirror) lists exactly the live edges the table holds, before and after a
// reopen.
func TestEdgeMirrorMatchesTable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	var ids []string
	var nodes []memory.Node
	for i := range 12 {
		ids = append(ids, fmt.Sprintf("n%d", i))
		nodes = append(nodes, memory.Node{ID: ids[i], Subkind: memory.Observation, ProjectID: "p", Label: ids[i]})
	}
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	rels := []memory.Relation{memory.RelatesTo, memory.Contradicts, memory.Supersedes}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pair := func() (string, string) {
		a := r.IntN(len(ids))
		b := (a + 1 + r.IntN(len(ids)-1)) % len(ids)
		return ids[a], ids[b]
	}
	check := func(when string) {
		t.Helper()
		got, err := s.EdgesOf(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		want := tableEdgesOf(t, s, ids)
		for _, id := range ids {
			g, w := sortedEdges(got[id]), sortedEdges(want[id])
			if !slices.EqualFunc(g, w, func(a, b memory.Edge) bool {
				return a.Src == b.Src && a.Dst == b.Dst && a.Relation == b.Relation && a.Weight == b.Weight &&
					a.Source == b.Source && a.ValidFrom.Equal(b.ValidFrom) && a.ValidTo.Equal(b.ValidTo)
			}) {
				t.Fatalf("%s: edges of %s\nmirror %+v\ntable  %+v", when, id, g, w)
			}
		}
	}
	ops := map[string]int{}
	for step := range 400 {
		src, dst := pair()
		rel := rels[r.IntN(len(rels))]
		switch k := r.IntN(10); {
		case k < 4:
			_, err = s.Link(ctx, memory.Edge{Src: src, Dst: dst, Relation: rel, Weight: 1 + r.Float64()})
			ops["link"]++
		case k < 6:
			err = s.Unlink(ctx, src, dst, rel)
			if err == nil {
				ops["unlink"]++
			}
			err = nil // unlinking an absent edge is ErrNotFound: fine here
		default:
			e := memory.Edge{Src: src, Dst: dst, Relation: rel, Weight: 1, Source: memory.SourceAgent,
				ValidFrom: base.Add(time.Duration(r.IntN(5)) * time.Hour)}
			if r.IntN(2) == 0 {
				e.ValidTo = e.ValidFrom.Add(time.Hour)
				ops["put closed"]++
			} else {
				ops["put live"]++
			}
			err = s.PutBatch(ctx, nil, []memory.Edge{e})
			if err != nil {
				ops["put refused"]++ // a second live edge of the same ends: the unique index refuses it
				err = nil
			}
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if step%50 == 0 {
			check(fmt.Sprintf("step %d", step))
		}
	}
	check("end")
	for _, op := range []string{"link", "unlink", "put closed", "put live"} {
		if ops[op] == 0 {
			t.Fatalf("no %s happened: %v", op, ops)
		}
	}
	s.Close()
	if s, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	check("reopened")
}

func sortedEdges(es []memory.Edge) []memory.Edge {
	out := slices.Clone(es)
	slices.SortFunc(out, func(a, b memory.Edge) int {
		if c := strings.Compare(a.Src+"\x00"+a.Dst, b.Src+"\x00"+b.Dst); c != 0 {
			return c
		}
		return strings.Compare(string(a.Relation), string(b.Relation))
	})
	return out
}

// tableEdgesOf is EdgesOf read from the table.
func tableEdgesOf(t *testing.T, s *Store, ids []string) map[string][]memory.Edge {
	t.Helper()
	rows, err := s.db.Query(`SELECT ` + edgeCols + ` FROM edges WHERE valid_to = 0`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]memory.Edge{}
	for rows.Next() {
		e, err := scanEdge(rows)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if e.Src == id || e.Dst == id {
				out[id] = append(out[id], e)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
