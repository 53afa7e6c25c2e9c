package redis

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// The reach registry: the spaces that hold, or held, a node of reach
// anywhere. Cross-project recall (memory.Filter.CrossProject, the
// injector's default) reads the tenant's other projects for such nodes
// only; with the whole project registry it searched every project of the
// namespace, each a lexical query and a vector search, for a turn: 63-134
// ms of Redis CPU a turn at 100 projects of 1,000 memories, where a
// project's own search costs 0.6 ms (docs/benchmarks.md). A project with
// no such node has nothing to give another one.
//
// Every write of a node of reach anywhere adds its space first (markReach:
// one SADD per space per registryRecheck and process), so a reader that
// finds a node's space missing can only be a reader whose copy (reachList,
// registryTTL old at most) predates the write, as with the project
// registry. The registry only grows (but for erasures): a space whose
// last such node changed reach stays, and costs its searches. Reads trust
// it from FormatReach on: a replica of an earlier version writes nodes
// without marking, and FinishUpgrade adds every space that holds one.

func (s *Store) reachKey() string { return s.ns + ":{r}:reach" }

// markReach adds the space of each node of reach anywhere among nodes to
// the reach registry: called before the write of the nodes (outside its
// transaction: the registry is in another slot).
func (s *Store) markReach(ctx context.Context, nodes ...*memory.Node) error {
	for _, n := range nodes {
		if n == nil || n.Reach != memory.ReachAnywhere {
			continue
		}
		sp := spaceOf(n)
		s.mu.Lock()
		at, ok := s.reach[sp]
		s.mu.Unlock()
		if ok && time.Since(at) < registryRecheck {
			continue
		}
		added, err := s.c.SAdd(ctx, s.reachKey(), sp).Result()
		if err != nil {
			return s.wrap("register reach", err)
		}
		s.mu.Lock()
		s.reach[sp] = time.Now()
		s.mu.Unlock()
		if added == 1 {
			s.reachList.invalidate() // this process's reads see it at once
		}
	}
	return nil
}

// crossSpaces lists the spaces that cross-project recall reads for nodes
// of reach anywhere, sorted (shared: callers must not modify it): the
// reach registry from FormatReach on, every registered space before.
func (s *Store) crossSpaces(ctx context.Context) ([]string, error) {
	if s.CurrentFormat(ctx) >= FormatReach {
		return s.reachList.get(ctx, s.regTTL, func(ctx context.Context) ([]string, error) {
			ps, err := s.c.SMembers(ctx, s.reachKey()).Result()
			if err != nil {
				return nil, s.wrap("list reach", err)
			}
			return ps, nil
		})
	}
	return s.recallProjects(ctx)
}

// rebuildReach adds sp to the reach registry when its visibility hash
// holds a node of reach anywhere (FinishUpgrade). It reports whether it
// found one.
func (s *Store) rebuildReach(ctx context.Context, sp string) (bool, error) {
	k := s.keys(sp)
	var cursor uint64
	for {
		kv, next, err := s.c.HScan(ctx, k.vis(), cursor, "", upgradePage).Result()
		if err != nil {
			return false, err
		}
		for j := 1; j < len(kv); j += 2 {
			if n, ok := fieldsNode(kv[j], sp); ok && n.Reach == memory.ReachAnywhere {
				if err := s.c.SAdd(ctx, s.reachKey(), sp).Err(); err != nil {
					return false, err
				}
				s.reachList.invalidate()
				return true, nil
			}
		}
		if cursor = next; cursor == 0 {
			return false, nil
		}
	}
}

// spaceList is a registry set as this process last read it (sorted, never
// mutated once kept), and when: reads within a TTL take the copy instead
// of a round trip.
type spaceList struct {
	mu   sync.Mutex
	list []string
	at   time.Time
	gen  uint64 // bumped by invalidate
}

// get returns the copy when it is younger than ttl, or reads the set
// again with read (sorted and kept unless invalidate ran meanwhile: the
// read may predate what invalidated it).
func (l *spaceList) get(ctx context.Context, ttl time.Duration, read func(context.Context) ([]string, error)) ([]string, error) {
	l.mu.Lock()
	list, at, gen := l.list, l.at, l.gen
	l.mu.Unlock()
	if !at.IsZero() && time.Since(at) < ttl {
		return list, nil
	}
	start := time.Now()
	ps, err := read(ctx)
	if err != nil {
		return nil, err
	}
	slices.Sort(ps)
	l.mu.Lock()
	if l.gen == gen {
		l.list, l.at = ps, start
	}
	l.mu.Unlock()
	return ps, nil
}

// invalidate makes the next get read the set.
func (l *spaceList) invalidate() {
	l.mu.Lock()
	l.at, l.gen = time.Time{}, l.gen+1
	l.mu.Unlock()
}
