package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/engram-memory/engram/pkg/memory"
)

// EdgesOf implements memory.Graph: the live edges touching any of ids, in
// one query per direction.
func (s *Store) EdgesOf(ctx context.Context, ids []string) (map[string][]memory.Edge, error) {
	out := map[string][]memory.Edge{}
	if len(ids) == 0 {
		return out, nil
	}
	want := make(map[string]bool, len(ids))
	args := make([]any, 0, 2*len(ids))
	for _, id := range ids {
		if !want[id] {
			want[id] = true
			args = append(args, id)
		}
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(args)), ",")
	args = append(args, args...)
	rows, err := s.db.QueryContext(ctx, `SELECT `+edgeCols+` FROM edges WHERE src IN (`+marks+`) AND valid_to = 0
		UNION ALL SELECT `+edgeCols+` FROM edges WHERE dst IN (`+marks+`) AND valid_to = 0`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: edges of: %w", err)
	}
	defer rows.Close()
	seen := map[memory.Edge]bool{}
	for rows.Next() {
		e, err := scanEdge(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: edges of: %w", err)
		}
		if seen[e] {
			continue // an edge between two of ids comes from both halves
		}
		seen[e] = true
		if want[e.Src] {
			out[e.Src] = append(out[e.Src], e)
		}
		if want[e.Dst] && e.Dst != e.Src {
			out[e.Dst] = append(out[e.Dst], e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: edges of: %w", err)
	}
	return out, nil
}
