package redis

import (
	"context"
	"slices"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

func b01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// evalTags runs script once per scope tag (call gives each run's keys and
// arguments) in one pipeline: one round trip, which a cluster client splits
// by node. When a server lacks the script it is loaded (on every shard)
// and the pipeline sent again.
func (s *Store) evalTags(ctx context.Context, script *goredis.Script, n int, call func(i int) ([]string, []any)) ([][]string, error) {
	for attempt := 0; ; attempt++ {
		cmds := make([]*goredis.Cmd, n)
		_, err := s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := range n {
				keys, args := call(i)
				cmds[i] = script.EvalSha(ctx, p, keys, args...)
			}
			return nil
		})
		if err != nil && attempt == 0 && goredis.HasErrorPrefix(err, "NOSCRIPT") {
			if err := script.Load(ctx, s.c).Err(); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		out := make([][]string, n)
		for i, c := range cmds {
			if out[i], err = c.StringSlice(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

// topScored returns the limit best of all, sorted by sortScored (only
// those are sorted).
func topScored(all []memory.Scored, limit int) []memory.Scored {
	sortBest(all, limit)
	if len(all) > limit {
		all = all[:limit]
	}
	return all
}

// sortScored orders best score first, ties by the smaller id.
func sortScored(all []memory.Scored) { slices.SortFunc(all, cmpScored) }

func cmpScored(a, b memory.Scored) int {
	if a.Score != b.Score {
		if a.Score > b.Score {
			return -1
		}
		return 1
	}
	return strings.Compare(a.ID, b.ID)
}

// sortBest moves the k best of all (by sortScored's order) to the front,
// sorted, and leaves the rest after them in no particular order: a
// quickselect, then a sort of k instead of all.
func sortBest(all []memory.Scored, k int) {
	if k >= len(all) {
		sortScored(all)
		return
	}
	if k <= 0 {
		return
	}
	lo, hi := 0, len(all) // the k-th best is in all[lo:hi]
	for hi-lo > 16 {
		// Median of three as the pivot, moved to the end.
		m := lo + (hi-lo)/2
		if cmpScored(all[m], all[lo]) < 0 {
			all[m], all[lo] = all[lo], all[m]
		}
		if cmpScored(all[hi-1], all[lo]) < 0 {
			all[hi-1], all[lo] = all[lo], all[hi-1]
		}
		if cmpScored(all[m], all[hi-1]) < 0 {
			all[m], all[hi-1] = all[hi-1], all[m]
		}
		pivot := all[hi-1]
		p := lo
		for i := lo; i < hi-1; i++ {
			if cmpScored(all[i], pivot) < 0 {
				all[i], all[p] = all[p], all[i]
				p++
			}
		}
		all[p], all[hi-1] = all[hi-1], all[p]
		switch {
		case p == k-1 || p == k:
			lo, hi = p, p
		case p < k:
			lo = p + 1
		default:
			hi = p
		}
	}
	if hi > lo {
		sortScored(all[lo:hi])
	}
	sortScored(all[:k])
}

// noSubkinds reports a filter that names only unknown subkinds: nothing
// can match.
func noSubkinds(f memory.Filter) bool {
	if len(f.Subkinds) == 0 {
		return false
	}
	for _, sk := range f.Subkinds {
		if sk.Valid() {
			return false
		}
	}
	return true
}

// ByPaths returns the nodes attached to any of paths, scored by the number
// of the given paths each is attached to (ties: newest update first).
func (s *Store) ByPaths(ctx context.Context, paths []string, f memory.Filter, limit int) ([]memory.Scored, error) {
	limit = memory.Limit(limit)
	paths = memory.NormalisePaths(paths)
	if len(paths) == 0 {
		return nil, nil
	}
	tags, err := s.scopeTags(ctx, f)
	if err != nil {
		return nil, err
	}
	now := s.now()
	type hit struct {
		n     memory.Node
		count int
	}
	var hits []hit
	for _, t := range tags {
		k := s.keys(t.project)
		pipe := s.c.Pipeline()
		cmds := make([]*goredis.StringSliceCmd, len(paths))
		for i, p := range paths {
			cmds[i] = pipe.SMembers(ctx, k.path(p))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, s.wrap("by paths", err)
		}
		counts := map[string]int{}
		var ids []string
		for _, c := range cmds {
			for _, id := range c.Val() {
				if counts[id] == 0 {
					ids = append(ids, id)
				}
				counts[id]++
			}
		}
		nodes, err := s.loadTagNodes(ctx, t.project, ids, false)
		if err != nil {
			return nil, err
		}
		for i := range nodes {
			if memory.Visible(&nodes[i], f, now) {
				hits = append(hits, hit{nodes[i], counts[nodes[i].ID]})
			}
		}
	}
	slices.SortFunc(hits, func(a, b hit) int {
		if a.count != b.count {
			return b.count - a.count
		}
		return memory.CompareTimeline(&a.n, &b.n)
	})
	out := make([]memory.Scored, 0, min(limit, len(hits)))
	for _, h := range hits {
		if len(out) == limit {
			break
		}
		out = append(out, memory.Scored{ID: h.n.ID, Score: float64(h.count)})
	}
	return out, nil
}
