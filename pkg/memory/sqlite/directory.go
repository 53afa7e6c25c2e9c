package sqlite

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

var (
	_ memory.Directory = (*Store)(nil)
	_ memory.Finder    = (*Store)(nil)
)

// Projects implements memory.Directory.
func (s *Store) Projects(ctx context.Context, tenant string) ([]string, error) {
	if err := s.memRead(ctx); err != nil {
		return nil, fmt.Errorf("sqlite: projects: %w", err)
	}
	seen := map[string]bool{}
	s.idx.mu.RLock()
	for _, h := range s.idx.heads {
		if h == nil {
			continue
		}
		if p := s.idx.projectOf(h); p.Tenant == tenant && p.Project != "" {
			seen[p.Project] = true
		}
	}
	s.idx.mu.RUnlock()
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT project FROM turns WHERE tenant = ?`, tenant)
	if err != nil {
		return nil, fmt.Errorf("sqlite: projects: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("sqlite: projects: %w", err)
		}
		seen[p] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: projects: %w", err)
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// SessionList implements memory.Directory.
func (s *Store) SessionList(ctx context.Context, p memory.ProjectRef, limit int) ([]memory.SessionInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT session, COUNT(DISTINCT turn_id), COUNT(*), MAX(json_extract(doc, '$.created_at'))
		FROM messages WHERE tenant = ? AND project = ? GROUP BY session`, p.Tenant, p.Project)
	if err != nil {
		return nil, fmt.Errorf("sqlite: sessions: %w", err)
	}
	defer rows.Close()
	var out []memory.SessionInfo
	for rows.Next() {
		var (
			si   memory.SessionInfo
			last *string
		)
		if err := rows.Scan(&si.Session, &si.Turns, &si.Messages, &last); err != nil {
			return nil, fmt.Errorf("sqlite: sessions: %w", err)
		}
		if last != nil {
			si.LastAt, _ = time.Parse(time.RFC3339Nano, *last)
		}
		out = append(out, si)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: sessions: %w", err)
	}
	slices.SortFunc(out, func(a, b memory.SessionInfo) int {
		if c := b.LastAt.Compare(a.LastAt); c != 0 {
			return c
		}
		switch {
		case a.Session < b.Session:
			return -1
		case a.Session > b.Session:
			return 1
		}
		return 0
	})
	if l := memory.Limit(limit); len(out) > l {
		out = out[:l]
	}
	return out, nil
}

// Find implements memory.Finder: one pass over the in-memory nodes
// keeping the first offset+limit+1 by CompareTimeline in a heap (the worst
// on top), then the page copied (nothing is read from the file).
func (s *Store) Find(ctx context.Context, q memory.TimelineQuery, keep func(*memory.Node) bool, offset int) ([]memory.Node, bool, error) {
	if err := s.memRead(ctx); err != nil {
		return nil, false, fmt.Errorf("sqlite: find: %w", err)
	}
	now := s.now()
	limit := memory.Limit(q.Limit)
	offset = max(offset, 0)
	h := &worst{k: offset + limit + 1, x: s.idx}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	var n memory.Node
	for rid, hd := range s.idx.heads {
		if s.idx.visible(&n, hd, &q, now) && (keep == nil || keep(&n)) {
			h.offer(found{uint32(rid), hd})
		}
	}
	ms := h.items
	slices.SortFunc(ms, func(a, b found) int { return s.idx.compareTimeline(a.h, b.h) })
	if offset >= len(ms) {
		return nil, false, nil
	}
	end := min(offset+limit, len(ms))
	rids := make([]uint32, 0, end-offset)
	for _, m := range ms[offset:end] {
		rids = append(rids, m.rid)
	}
	return s.idx.copyHeads(make([]memory.Node, 0, len(rids)), rids), len(ms) > end, nil
}

type found struct {
	rid uint32
	h   *head
}

// visible reports whether the node of h (filled into n) is one q shows
// (x.mu held; h nil: no).
func (x *index) visible(n *memory.Node, h *head, q *memory.TimelineQuery, now time.Time) bool {
	if h == nil || (q.OnlySession && x.strs.str(h.session) != q.SessionID) {
		return false
	}
	x.fillFields(n, h)
	if q.AsOf.IsZero() {
		return memory.Visible(n, q.Filter, now)
	}
	return memory.AsOfVisible(n, q.Filter, q.AsOf)
}

// worst keeps the k best nodes by CompareTimeline, the worst of them at
// the root of a heap.
type worst struct {
	k     int
	x     *index
	items []found
}

func (w *worst) Len() int           { return len(w.items) }
func (w *worst) Less(i, j int) bool { return w.x.compareTimeline(w.items[i].h, w.items[j].h) > 0 }
func (w *worst) Swap(i, j int)      { w.items[i], w.items[j] = w.items[j], w.items[i] }
func (w *worst) Push(x any)         { w.items = append(w.items, x.(found)) }
func (w *worst) Pop() any {
	x := w.items[len(w.items)-1]
	w.items = w.items[:len(w.items)-1]
	return x
}

func (w *worst) offer(f found) {
	if len(w.items) < w.k {
		heap.Push(w, f)
		return
	}
	if w.x.compareTimeline(f.h, w.items[0].h) < 0 { // better than the worst kept
		w.items[0] = f
		heap.Fix(w, 0)
	}
}
