package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// Count implements memory.Counter: the nodes from the filter fields of
// each project's "vis" hash (HSCAN, a page at a time, so that a large
// project does not hold the server), the pending embeddings from the
// pending and embedded-by-model sets (ZCARD), as HasPendingEmbeddings
// reads them.
func (s *Store) Count(ctx context.Context, pr memory.ProjectRef, model string) (memory.Counts, error) {
	c := memory.NewCounts()
	tags := []string{space(pr)}
	if pr.Project != "" {
		tags = append(tags, space(memory.ProjectRef{Tenant: pr.Tenant}))
	}
	for _, p := range tags {
		k := s.keys(p)
		var cursor uint64
		for {
			kv, next, err := s.c.HScan(ctx, k.vis(), cursor, "", 1000).Result()
			if err != nil {
				return c, s.wrap("count", err)
			}
			for i := 1; i < len(kv); i += 2 {
				if n, ok := fieldsNode(kv[i], p); ok {
					n.EmbeddingModel = model // the vectors are counted below
					c.CountNode(&n, model)
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
		models, err := s.c.SMembers(ctx, k.models()).Result()
		if err != nil {
			return c, s.wrap("count", err)
		}
		pipe := s.c.Pipeline()
		cards := []*goredis.IntCmd{pipe.ZCard(ctx, k.pending())}
		for _, m := range models {
			if m != model {
				cards = append(cards, pipe.ZCard(ctx, k.embedded(m)))
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return c, s.wrap("count", err)
		}
		for _, card := range cards {
			c.Pending += int(card.Val())
		}
	}
	return c, nil
}
