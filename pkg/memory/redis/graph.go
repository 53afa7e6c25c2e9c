package redis

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// Edges are kept twice: in eo:<src> (out-edges, under the source's
// project: the primary copy) and in ei:<dst> (in-edges, under the
// destination's project), both hashes of JSON edges. A live edge's field is
// "<other end>\x1f<relation>"; a closed one (unlinked) moves to
// "<other end>\x1f<relation>\x1f<valid-from>\x1f<valid-to>" so that linking
// again creates a new edge and the old one stays for as-of reads.
const sep = "\x1f"

func liveField(other string, rel memory.Relation) string { return other + sep + string(rel) }

func closedField(other string, e memory.Edge) string {
	return other + sep + string(e.Relation) + sep + strconv.FormatInt(e.ValidFrom.UnixNano(), 10) +
		sep + strconv.FormatInt(e.ValidTo.UnixNano(), 10)
}

func isLiveField(f string) bool { return strings.Count(f, sep) == 1 }

func encodeEdge(e memory.Edge) string {
	b, _ := json.Marshal(e)
	return string(b)
}

func decodeEdge(s string) (memory.Edge, error) {
	var e memory.Edge
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return memory.Edge{}, fmt.Errorf("redis: bad edge record: %w", err)
	}
	return e, nil
}

// writeEdge queues both copies of e. A live edge replaces the live one of
// its ends and relation; a closed one is added to the closed ones and, with
// unlink, removes the live one (the edge it closes).
func (s *Store) writeEdge(ctx context.Context, c goredis.Cmdable, srcProject, dstProject string, e memory.Edge, unlink bool) {
	s.writeEdgeOut(ctx, c, srcProject, e, unlink)
	s.writeEdgeIn(ctx, c, dstProject, e, unlink)
}

func (s *Store) writeEdgeOut(ctx context.Context, c goredis.Cmdable, srcProject string, e memory.Edge, unlink bool) {
	k := s.keys(srcProject)
	if e.Relation == memory.Contradicts {
		c.SAdd(ctx, k.contradicting(), e.Src)
	}
	if e.Live() {
		c.HSet(ctx, k.edgesOut(e.Src), liveField(e.Dst, e.Relation), encodeEdge(e))
		return
	}
	if unlink {
		c.HDel(ctx, k.edgesOut(e.Src), liveField(e.Dst, e.Relation))
	}
	c.HSet(ctx, k.edgesOut(e.Src), closedField(e.Dst, e), encodeEdge(e))
}

func (s *Store) writeEdgeIn(ctx context.Context, c goredis.Cmdable, dstProject string, e memory.Edge, unlink bool) {
	k := s.keys(dstProject)
	if e.Relation == memory.Contradicts {
		c.SAdd(ctx, k.contradicting(), e.Dst)
	}
	if e.Live() {
		c.HSet(ctx, k.edgesIn(e.Dst), liveField(e.Src, e.Relation), encodeEdge(e))
		return
	}
	if unlink {
		c.HDel(ctx, k.edgesIn(e.Dst), liveField(e.Src, e.Relation))
	}
	c.HSet(ctx, k.edgesIn(e.Dst), closedField(e.Src, e), encodeEdge(e))
}

// liveEdge reads the live src -rel-> dst edge from the primary copy.
func liveEdge(ctx context.Context, c goredis.Cmdable, k keys, src, dst string, rel memory.Relation) (memory.Edge, bool, error) {
	v, err := c.HGet(ctx, k.edgesOut(src), liveField(dst, rel)).Result()
	if errors.Is(err, goredis.Nil) {
		return memory.Edge{}, false, nil
	}
	if err != nil {
		return memory.Edge{}, false, err
	}
	e, err := decodeEdge(v)
	return e, err == nil, err
}

// nodeProjects resolves the projects of existing nodes: ErrNotFound names
// the first unknown one.
func (s *Store) nodeProjects(ctx context.Context, ids ...string) ([]string, error) {
	projs, err := s.projectsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ids))
	pipe := s.c.Pipeline()
	cmds := make([]*goredis.IntCmd, len(ids))
	for i, id := range ids {
		p, ok := projs[id]
		if !ok {
			return nil, fmt.Errorf("%w: node %s", memory.ErrNotFound, id)
		}
		out[i] = p
		cmds[i] = pipe.Exists(ctx, s.keys(p).node(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap("find nodes", err)
	}
	for i, c := range cmds {
		if c.Val() == 0 {
			return nil, fmt.Errorf("%w: node %s", memory.ErrNotFound, ids[i])
		}
	}
	return out, nil
}

// Link creates the edge or reinforces the live one (memory.Relink).
func (s *Store) Link(ctx context.Context, in memory.Edge) (memory.Edge, error) {
	e, err := memory.PrepareEdge(in, s.now())
	if err != nil {
		return memory.Edge{}, err
	}
	projs, err := s.nodeProjects(ctx, e.Src, e.Dst)
	if err != nil {
		return memory.Edge{}, err
	}
	ps, pd := projs[0], projs[1]
	if unspace(ps).Tenant != unspace(pd).Tenant {
		return memory.Edge{}, fmt.Errorf("%w: memories %s and %s belong to different tenants", memory.ErrInvalid, e.Src, e.Dst)
	}
	ks := s.keys(ps)
	var out memory.Edge
	err = s.retryTx(ctx, "link", func(tx *goredis.Tx) error {
		cur, ok, err := liveEdge(ctx, tx, ks, e.Src, e.Dst, e.Relation)
		if err != nil {
			return err
		}
		next := e
		if ok {
			next = memory.Relink(cur, e)
		}
		if ps != pd {
			// Another slot: the copy first, the primary last; a retry
			// recomputes both from the primary, so a crash in between
			// converges.
			cp := s.c.Pipeline()
			s.writeEdgeIn(ctx, cp, pd, next, false)
			if _, err := cp.Exec(ctx); err != nil {
				return err
			}
		}
		_, err = tx.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			if ps == pd {
				s.writeEdge(ctx, pipe, ps, pd, next, false)
			} else {
				s.writeEdgeOut(ctx, pipe, ps, next, false)
			}
			return nil
		})
		if err == nil {
			out = next
		}
		return err
	}, linkWatch(ks, s.keys(pd), e, ps == pd)...)
	return out, err
}

func linkWatch(ks, kd keys, e memory.Edge, same bool) []string {
	w := []string{ks.edgesOut(e.Src)}
	if same {
		w = append(w, kd.edgesIn(e.Dst))
	}
	return w
}

// Unlink closes the live edge (ErrNotFound when there is none).
func (s *Store) Unlink(ctx context.Context, src, dst string, rel memory.Relation) error {
	if src == "" || dst == "" || !rel.Valid() {
		return fmt.Errorf("%w: unlink needs both ends and a known relation", memory.ErrInvalid)
	}
	projs, err := s.projectsOf(ctx, []string{src, dst})
	if err != nil {
		return err
	}
	ps, ok1 := projs[src]
	pd, ok2 := projs[dst]
	if !ok1 || !ok2 {
		return fmt.Errorf("%w: no live edge %s -%s-> %s", memory.ErrNotFound, src, rel, dst)
	}
	ks := s.keys(ps)
	now := s.now().UTC()
	return s.retryTx(ctx, "unlink", func(tx *goredis.Tx) error {
		cur, ok, err := liveEdge(ctx, tx, ks, src, dst, rel)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: no live edge %s -%s-> %s", memory.ErrNotFound, src, rel, dst)
		}
		cur.ValidTo = now
		if !cur.ValidTo.After(cur.ValidFrom) {
			cur.ValidTo = cur.ValidFrom
		}
		if ps != pd {
			cp := s.c.Pipeline()
			s.writeEdgeIn(ctx, cp, pd, cur, true)
			if _, err := cp.Exec(ctx); err != nil {
				return err
			}
		}
		_, err = tx.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			if ps == pd {
				s.writeEdge(ctx, pipe, ps, pd, cur, true)
			} else {
				s.writeEdgeOut(ctx, pipe, ps, cur, true)
			}
			return nil
		})
		return err
	}, linkWatch(ks, s.keys(pd), memory.Edge{Src: src, Dst: dst}, ps == pd)...)
}

// Edges lists the live edges touching id, both directions.
func (s *Store) Edges(ctx context.Context, id string) ([]memory.Edge, error) {
	m, err := s.edgesOf(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	return m[id], nil
}

// edgesOf reads the live edges of many nodes (pipelined), sorted by
// memory's natural order: source, destination, relation.
func (s *Store) edgesOf(ctx context.Context, ids []string) (map[string][]memory.Edge, error) {
	projs, err := s.projectsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	pipe := s.c.Pipeline()
	type q struct {
		id      string
		out, in *goredis.MapStringStringCmd
	}
	var qs []q
	for _, id := range ids {
		p, ok := projs[id]
		if !ok {
			continue
		}
		k := s.keys(p)
		qs = append(qs, q{id, pipe.HGetAll(ctx, k.edgesOut(id)), pipe.HGetAll(ctx, k.edgesIn(id))})
	}
	out := make(map[string][]memory.Edge, len(ids))
	if len(qs) == 0 {
		return out, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap("edges", err)
	}
	for _, x := range qs {
		var es []memory.Edge
		for _, h := range []map[string]string{x.out.Val(), x.in.Val()} {
			for f, v := range h {
				if !isLiveField(f) {
					continue
				}
				e, err := decodeEdge(v)
				if err != nil {
					return nil, err
				}
				es = append(es, e)
			}
		}
		slices.SortFunc(es, compareEdges)
		out[x.id] = es
	}
	return out, nil
}

func compareEdges(a, b memory.Edge) int {
	return cmp.Or(strings.Compare(a.Src, b.Src), strings.Compare(a.Dst, b.Dst),
		strings.Compare(string(a.Relation), string(b.Relation)), a.ValidFrom.Compare(b.ValidFrom))
}

// Neighbours walks live edges both ways up to hops; nodes failing the
// filter are neither returned nor walked through.
func (s *Store) Neighbours(ctx context.Context, id string, hops int, f memory.Filter) ([]memory.Neighbour, error) {
	if err := memory.CheckHops(hops); err != nil {
		return nil, err
	}
	if _, err := s.nodeProjects(ctx, id); err != nil {
		return nil, err
	}
	now := s.now()
	seen := map[string]bool{id: true}
	frontier := []string{id}
	var out []memory.Neighbour
	for depth := 1; depth <= hops && len(frontier) > 0; depth++ {
		edges, err := s.edgesOf(ctx, frontier)
		if err != nil {
			return nil, err
		}
		via := map[string]memory.Edge{}
		var cands []string
		for _, from := range frontier {
			for _, e := range edges[from] {
				other := e.Dst
				if other == from {
					other = e.Src
				}
				if seen[other] {
					continue
				}
				best, ok := via[other]
				if !ok {
					cands = append(cands, other)
				}
				if !ok || e.Weight > best.Weight || (e.Weight == best.Weight && compareEdges(e, best) < 0) {
					via[other] = e
				}
			}
		}
		nodes, err := s.loadNodes(ctx, cands, false)
		if err != nil {
			return nil, err
		}
		frontier = frontier[:0]
		var level []memory.Neighbour
		for _, c := range cands {
			seen[c] = true
			n, ok := nodes[c]
			if !ok || !memory.Visible(&n, f, now) {
				continue
			}
			level = append(level, memory.Neighbour{Node: n, Edge: via[c], Depth: depth})
			frontier = append(frontier, c)
		}
		slices.SortFunc(level, func(a, b memory.Neighbour) int {
			if a.Edge.Weight != b.Edge.Weight {
				if a.Edge.Weight > b.Edge.Weight {
					return -1
				}
				return 1
			}
			return strings.Compare(a.Node.ID, b.Node.ID)
		})
		out = append(out, level...)
	}
	return out, nil
}
