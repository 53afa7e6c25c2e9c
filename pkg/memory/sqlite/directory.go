package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

var _ memory.Directory = (*Store)(nil)

// Projects implements memory.Directory.
func (s *Store) Projects(ctx context.Context, tenant string) ([]string, error) {
	if err := s.memRead(ctx); err != nil {
		return nil, fmt.Errorf("sqlite: projects: %w", err)
	}
	seen := map[string]bool{}
	s.idx.mu.RLock()
	for _, h := range s.idx.heads {
		if h != nil && h.TenantID == tenant && h.ProjectID != "" {
			seen[h.ProjectID] = true
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

// SummaryList implements memory.Directory.
func (s *Store) SummaryList(ctx context.Context, ref memory.SessionRef) ([]memory.Summary, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT doc FROM summaries WHERE tenant = ? AND project = ? AND session = ? ORDER BY seq`,
		ref.Tenant, ref.Project, ref.Session)
	if err != nil {
		return nil, fmt.Errorf("sqlite: summaries: %w", err)
	}
	defer rows.Close()
	var out []memory.Summary
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("sqlite: summaries: %w", err)
		}
		var sum memory.Summary
		if err := json.Unmarshal(doc, &sum); err != nil {
			return nil, fmt.Errorf("sqlite: decode summary: %w", err)
		}
		out = append(out, sum)
	}
	return out, rows.Err()
}

// Find implements memory.Directory: one pass over the in-memory nodes, the
// matches sorted, the page copied (nothing is read from the file).
func (s *Store) Find(ctx context.Context, q memory.TimelineQuery, keep func(*memory.Node) bool, offset int) ([]memory.Node, bool, error) {
	if err := s.memRead(ctx); err != nil {
		return nil, false, fmt.Errorf("sqlite: find: %w", err)
	}
	now := s.now()
	limit := memory.Limit(q.Limit)
	offset = max(offset, 0)
	type match struct {
		rid uint32
		h   *memory.Node
	}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	var ms []match
	for rid, h := range s.idx.heads {
		if h == nil || (q.OnlySession && h.SessionID != q.SessionID) {
			continue
		}
		ok := false
		if q.AsOf.IsZero() {
			ok = memory.Visible(h, q.Filter, now)
		} else {
			ok = memory.AsOfVisible(h, q.Filter, q.AsOf)
		}
		if ok && (keep == nil || keep(h)) {
			ms = append(ms, match{uint32(rid), h})
		}
	}
	slices.SortFunc(ms, func(a, b match) int { return memory.CompareTimeline(a.h, b.h) })
	if offset >= len(ms) {
		return nil, false, nil
	}
	end := min(offset+limit, len(ms))
	rids := make([]uint32, 0, end-offset)
	for _, m := range ms[offset:end] {
		rids = append(rids, m.rid)
	}
	return s.idx.copyHeads(make([]memory.Node, 0, len(rids)), rids), end < len(ms), nil
}
