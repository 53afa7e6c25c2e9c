package redis

import (
	"hash/maphash"
	"sync"
)

// projectCache remembers the project of node ids (immutable once written),
// so that reads by id skip the id index. It is bounded (emptied when full)
// and shaped for the garbage collector: the map is keyed by a 128-bit hash
// of the id (two maphash seeds) and holds an index into the few project
// names, so it contains no pointers and a full cache of 200,000 ids is
// never scanned. Two ids share a key with probability about n²/2^129
// (below 10^-28 at 200,000 ids), far below the chance of a memory error;
// as a map keyed by the ids themselves it cost a Redis turn of the injector
// benchmark about 5% of the process' CPU in lookups and garbage collection.
type projectCache struct {
	mu    sync.RWMutex
	seeds [2]maphash.Seed
	ids   map[[2]uint64]uint32 // id hash -> index in names
	names []string
	index map[string]uint32 // name -> index in names
	limit int
}

func newProjectCache(limit int) *projectCache {
	return &projectCache{
		seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		ids:   map[[2]uint64]uint32{},
		index: map[string]uint32{},
		limit: limit,
	}
}

func (c *projectCache) key(id string) [2]uint64 {
	return [2]uint64{maphash.String(c.seeds[0], id), maphash.String(c.seeds[1], id)}
}

// get returns the project of id, if cached.
func (c *projectCache) get(id string) (string, bool) {
	k := c.key(id)
	c.mu.RLock()
	defer c.mu.RUnlock()
	i, ok := c.ids[k]
	if !ok {
		return "", false
	}
	return c.names[i], true
}

// getMany adds the cached projects of ids to out and returns the ids not
// cached (empty ids are left out of both).
func (c *projectCache) getMany(ids []string, out map[string]string) (miss []string) {
	keys := make([][2]uint64, len(ids))
	for i, id := range ids {
		keys[i] = c.key(id)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, id := range ids {
		if p, ok := c.ids[keys[i]]; ok {
			out[id] = c.names[p]
		} else if id != "" {
			miss = append(miss, id)
		}
	}
	return miss
}

// put caches id -> project.
func (c *projectCache) put(id, project string) {
	k := c.key(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ids) >= c.limit {
		clear(c.ids)
		clear(c.index)
		c.names = c.names[:0]
	}
	i, ok := c.index[project]
	if !ok {
		i = uint32(len(c.names))
		c.names = append(c.names, project)
		c.index[project] = i
	}
	c.ids[k] = i
}

// drop forgets id (an erasure deleted its node).
func (c *projectCache) drop(id string) {
	k := c.key(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ids, k)
}

// reset forgets everything (an erasure deleted whole spaces, whose names
// the cache holds).
func (c *projectCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.ids)
	clear(c.index)
	c.names = c.names[:0]
}
