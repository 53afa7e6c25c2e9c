package redis

import (
	"context"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// upgradeScopes brings every scope (the global one and each project's
// space) whose statistics hold a version under version in field up to it:
// page gets the scope's nodes a page of its timeline at a time and returns
// how many it changed; the field is set once the whole scope is done. The
// start-up passes (EnsureLexicalIndex, EnsureConversationIndex) share it:
// scopes that are current cost one pipelined HGET each; a scope reads every
// node once (a ZSCAN of its timeline, a GetMany per page).
func (s *Store) upgradeScopes(ctx context.Context, what, field string, version int, page func(ctx context.Context, k keys, nodes []memory.Node) (int, error)) (int, error) {
	projects, err := s.projects(ctx)
	if err != nil {
		return 0, err
	}
	projects = append([]string{""}, projects...)
	pipe := s.c.Pipeline()
	vs := make([]*goredis.StringCmd, len(projects))
	for i, p := range projects {
		vs[i] = pipe.HGet(ctx, s.keys(p).stats(), field)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != goredis.Nil {
		return 0, s.wrap(what+" version", err)
	}
	total := 0
	for i, p := range projects {
		if v, _ := strconv.Atoi(vs[i].Val()); v >= version {
			continue
		}
		n, err := s.upgradeScope(ctx, p, field, version, page)
		total += n
		if err != nil {
			return total, s.wrap(fmt.Sprintf("%s of %q", what, p), err)
		}
	}
	return total, nil
}

// upgradeScope runs page over one scope's nodes (project is the scope's
// space, see spaceOf), then marks the scope current.
func (s *Store) upgradeScope(ctx context.Context, project, field string, version int, page func(ctx context.Context, k keys, nodes []memory.Node) (int, error)) (int, error) {
	k := s.keys(project)
	done := 0
	var cursor uint64
	for {
		pairs, next, err := s.c.ZScan(ctx, k.all(), cursor, "", 500).Result()
		if err != nil {
			return done, err
		}
		ids := make([]string, 0, len(pairs)/2)
		for i := 0; i+1 < len(pairs); i += 2 {
			ids = append(ids, pairs[i])
		}
		if len(ids) > 0 {
			nodes, err := s.GetMany(ctx, ids)
			if err != nil {
				return done, err
			}
			mine := nodes[:0]
			for i := range nodes {
				if spaceOf(&nodes[i]) == project {
					mine = append(mine, nodes[i])
				}
			}
			if len(mine) > 0 {
				n, err := page(ctx, k, mine)
				done += n
				if err != nil {
					return done, err
				}
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	return done, s.c.HSet(ctx, k.stats(), field, version).Err()
}
