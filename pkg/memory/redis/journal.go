package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

var _ memory.Journal = (*Store)(nil)

// A project's pass journals: a hash of id -> record, and sorted sets of ids
// by start time (milliseconds), one for the project and one per session (a
// session's passes are read without walking the project's), all under the
// project's hash tag.
func (k keys) passes() string                    { return k.p + "pass" }
func (k keys) passesByAt() string                { return k.p + "passat" }
func (k keys) sessionPassesByAt(s string) string { return k.session(s) + "passat" }

// PutPass implements memory.Journal.
func (s *Store) PutPass(ctx context.Context, p memory.Pass) error {
	if err := memory.CheckPass(p); err != nil {
		return err
	}
	doc, err := memory.EncodePass(p)
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	sp := space(memory.ProjectRef{Tenant: p.Tenant, Project: p.Project})
	if err := s.register(ctx, sp); err != nil {
		return err
	}
	k := s.keys(sp)
	_, err = s.c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		pipe.HSet(ctx, k.passes(), p.ID, doc)
		z := goredis.Z{Score: float64(p.StartedAt.UnixMilli()), Member: p.ID}
		pipe.ZAdd(ctx, k.passesByAt(), z)
		pipe.ZAdd(ctx, k.sessionPassesByAt(p.Session), z)
		return nil
	})
	return s.wrap("put pass", err)
}

// tenantProjects lists the registered project spaces of tenant (its
// global space excluded: a pass always has a project).
func (s *Store) tenantProjects(ctx context.Context, tenant string) ([]string, error) {
	ps, err := s.projects(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ps, func(p string) bool {
		r := unspace(p)
		return r.Tenant != tenant || r.Project == ""
	}), nil
}

// GetPass implements memory.Journal.
func (s *Store) GetPass(ctx context.Context, in memory.ProjectRef, id string) (memory.Pass, error) {
	projects := []string{space(in)}
	if in.Project == "" {
		ps, err := s.tenantProjects(ctx, in.Tenant)
		if err != nil {
			return memory.Pass{}, err
		}
		projects = ps
	}
	for _, p := range projects {
		doc, err := s.c.HGet(ctx, s.keys(p).passes(), id).Bytes()
		if errors.Is(err, goredis.Nil) {
			continue
		}
		if err != nil {
			return memory.Pass{}, s.wrap("get pass", err)
		}
		rec, err := memory.DecodePass(doc)
		if err != nil {
			return memory.Pass{}, fmt.Errorf("redis: %w", err)
		}
		return rec, nil
	}
	return memory.Pass{}, fmt.Errorf("pass %s: %w", id, memory.ErrNotFound)
}

// Passes implements memory.Journal. It reads each project's passes newest
// first in pages and filters them here.
func (s *Store) Passes(ctx context.Context, q memory.PassQuery) ([]memory.Pass, error) {
	limit := memory.Limit(q.Limit)
	projects := []string{space(memory.ProjectRef{Tenant: q.Tenant, Project: q.Project})}
	if q.Project == "" {
		ps, err := s.tenantProjects(ctx, q.Tenant)
		if err != nil {
			return nil, err
		}
		projects = ps
	}
	var out []memory.Pass
	const page = 256
	for _, p := range projects {
		k := s.keys(p)
		index := k.passesByAt()
		if q.Session != "" {
			index = k.sessionPassesByAt(q.Session)
		}
		found := 0
		for start := int64(0); found < limit; start += page {
			ids, err := s.c.ZRevRange(ctx, index, start, start+page-1).Result()
			if err != nil {
				return nil, s.wrap("list passes", err)
			}
			if len(ids) == 0 {
				break
			}
			docs, err := s.c.HMGet(ctx, k.passes(), ids...).Result()
			if err != nil {
				return nil, s.wrap("list passes", err)
			}
			for _, d := range docs {
				str, ok := d.(string)
				if !ok {
					continue
				}
				rec, err := memory.DecodePass([]byte(str))
				if err != nil {
					return nil, fmt.Errorf("redis: %w", err)
				}
				if memory.MatchPass(&rec, q) {
					out = append(out, rec)
					found++
				}
			}
			if len(ids) < page {
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b memory.Pass) int { return memory.ComparePasses(&a, &b) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
