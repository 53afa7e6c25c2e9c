package redis

import (
	"context"
	"slices"

	"github.com/engram-memory/engram/pkg/memory"
)

var _ memory.Finder = (*Store)(nil)

// Find implements memory.Finder: each scope of the filter's timeline walked
// newest first (as Timeline) until it has offset+limit+1 nodes that the
// filter shows and keep accepts; the page cut from their merge.
func (s *Store) Find(ctx context.Context, q memory.TimelineQuery, keep func(*memory.Node) bool, offset int) ([]memory.Node, bool, error) {
	limit := memory.Limit(q.Limit)
	offset = max(offset, 0)
	want := offset + limit + 1
	tags, err := s.scopeTags(ctx, q.Filter)
	if err != nil {
		return nil, false, err
	}
	now := s.now()
	accept := func(n *memory.Node) bool {
		if q.OnlySession && n.SessionID != q.SessionID {
			return false
		}
		if !q.AsOf.IsZero() {
			if !memory.AsOfVisible(n, q.Filter, q.AsOf) {
				return false
			}
		} else if !memory.Visible(n, q.Filter, now) {
			return false
		}
		return keep == nil || keep(n)
	}
	var all []memory.Node
	for _, t := range tags {
		got, err := s.scanTag(ctx, t.project, want, accept)
		if err != nil {
			return nil, false, err
		}
		all = append(all, got...)
	}
	slices.SortFunc(all, func(a, b memory.Node) int { return memory.CompareTimeline(&a, &b) })
	if offset >= len(all) {
		return nil, false, nil
	}
	end := min(offset+limit, len(all))
	return all[offset:end], len(all) > end, nil
}
