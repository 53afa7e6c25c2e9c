package sqlite

import (
	"context"
	"fmt"

	"github.com/engram-memory/engram/pkg/memory"
)

// Count implements memory.Counter from the in-memory heads.
func (s *Store) Count(ctx context.Context, p memory.ProjectRef, model string) (memory.Counts, error) {
	c := memory.NewCounts()
	if err := s.memRead(ctx); err != nil {
		return c, fmt.Errorf("sqlite: count: %w", err)
	}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	for _, h := range s.idx.heads {
		if h != nil && h.TenantID == p.Tenant && (h.ProjectID == p.Project || h.ProjectID == "") {
			c.CountNode(h, model)
		}
	}
	return c, nil
}
