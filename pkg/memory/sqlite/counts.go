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
	var n memory.Node
	for _, h := range s.idx.heads {
		if h != nil {
			if hp := s.idx.projectOf(h); hp.Tenant == p.Tenant && (hp.Project == p.Project || hp.Project == "") {
				s.idx.fillFields(&n, h)
				c.CountNode(&n, model)
			}
		}
	}
	return c, nil
}
