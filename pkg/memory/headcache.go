package memory

import (
	"context"
	"sync"
)

// HeadCache holds the heads (nodes without their bodies, as
// TextStore.GetHeads returns them) that a store read during one Retrieve,
// for that Retrieve's later loads of the same nodes: a store that judges a
// channel's candidates by their heads keeps them here, and its GetHeads
// answers those ids from it instead of reading them again (on Redis the
// lexical leaders' heads, then the candidate load: one lookup of each
// node instead of two). It lives as long as the Retrieve that made it, so
// a head is never older than that call; reads are not a snapshot anyway.
type HeadCache struct {
	mu sync.Mutex
	m  map[string]Node
}

type headCacheKey struct{}

// WithHeadCache returns ctx with a new, empty HeadCache.
func WithHeadCache(ctx context.Context) context.Context {
	return context.WithValue(ctx, headCacheKey{}, &HeadCache{m: map[string]Node{}})
}

// HeadCacheOf is ctx's HeadCache (nil when it has none).
func HeadCacheOf(ctx context.Context) *HeadCache {
	c, _ := ctx.Value(headCacheKey{}).(*HeadCache)
	return c
}

// Put keeps heads.
func (c *HeadCache) Put(heads ...Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range heads {
		c.m[n.ID] = n
	}
}

// Get returns the head of id, if kept.
func (c *HeadCache) Get(id string) (Node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.m[id]
	return n, ok
}
