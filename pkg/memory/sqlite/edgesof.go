package sqlite

import (
	"context"
	"fmt"

	"github.com/engram-memory/engram/pkg/memory"
)

// EdgesOf implements memory.Graph: the live edges touching any of ids,
// served from the index's mirror of the live edges (edges.go).
func (s *Store) EdgesOf(ctx context.Context, ids []string) (map[string][]memory.Edge, error) {
	if err := s.memRead(ctx); err != nil {
		return nil, fmt.Errorf("sqlite: edges of: %w", err)
	}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	return s.idx.edgesOf(ids), nil
}
