package redis

import (
	"context"

	"github.com/engram-memory/engram/pkg/memory"
)

// EdgesOf implements memory.Graph: the live edges of many nodes in one
// pipelined round trip.
func (s *Store) EdgesOf(ctx context.Context, ids []string) (map[string][]memory.Edge, error) {
	m, err := s.edgesOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	for id, es := range m {
		if len(es) == 0 {
			delete(m, id)
		}
	}
	return m, nil
}
