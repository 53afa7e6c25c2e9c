package redis

import (
	"context"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// Contradiction hints. Each project keeps a set (cx) of its nodes that
// are, or were, an end of a contradicts edge: every edge write adds its
// ends (writeEdgeOut, writeEdgeIn), in the same pipeline or transaction as
// the edge, and nothing removes them (a closed edge or a deleted node
// leaves a hint that costs one edge read, never a wrong answer). The
// member "" (no node id is empty) says the set is complete: a project
// registered by this version gets it at registration, before any edge; a
// project or the global tag written by an earlier version gets it from
// EnsureContradictionHints, which fills the set from the edges first.
// Without it every node of the project is a "maybe".
const hintsComplete = ""

var (
	_ memory.ContradictionHints = (*Store)(nil)
	_ memory.HintedHeads        = (*Store)(nil)
)

// MayContradict implements memory.ContradictionHints: one SMISMEMBER per
// project, pipelined. Unknown ids are left out (maybe).
func (s *Store) MayContradict(ctx context.Context, ids []string) (map[string]bool, error) {
	if len(ids) == 0 {
		return map[string]bool{}, nil
	}
	refs, err := s.refsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	pipe := s.c.Pipeline()
	h := s.queueHints(ctx, pipe, refs)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap("contradiction hints", err)
	}
	return h.result()
}

// hintCmds are the SMISMEMBERs of a MayContradict queued on a pipeline.
type hintCmds struct {
	byProject map[string][]string
	cmds      map[string]*goredis.BoolSliceCmd
}

// queueHints queues on pipe the SMISMEMBER per project that MayContradict
// sends for refs; result reads their answers once the pipeline ran.
func (s *Store) queueHints(ctx context.Context, pipe goredis.Pipeliner, refs []nodeRef) *hintCmds {
	h := &hintCmds{byProject: map[string][]string{}}
	for _, r := range refs {
		h.byProject[r.project] = append(h.byProject[r.project], r.id)
	}
	h.cmds = make(map[string]*goredis.BoolSliceCmd, len(h.byProject))
	for p, pids := range h.byProject {
		members := make([]any, 0, len(pids)+1)
		members = append(members, hintsComplete) // first: is the set complete?
		for _, id := range pids {
			members = append(members, id)
		}
		h.cmds[p] = pipe.SMIsMember(ctx, s.keys(p).contradicting(), members...)
	}
	return h
}

func (h *hintCmds) result() (map[string]bool, error) {
	out := map[string]bool{}
	for p, c := range h.cmds {
		v, pids := c.Val(), h.byProject[p]
		if len(v) != len(pids)+1 {
			return nil, fmt.Errorf("redis: contradiction hints of %q: %d answers for %d members", p, len(v), len(pids)+1)
		}
		for i, id := range pids {
			out[id] = !v[0] || v[i+1]
		}
	}
	return out, nil
}

// EnsureContradictionHints completes the contradiction hints of every
// project (and the global tag) that lacks them: data written before the
// hints existed. It reads every node's edge fields once (one pipeline per
// page of a ZSCAN), so it belongs at start-up (app.OpenStore calls it);
// projects that are complete cost one pipelined SISMEMBER each. It is
// idempotent and safe beside writers of this version, which hint their own
// edges.
func (s *Store) EnsureContradictionHints(ctx context.Context) error {
	projects, err := s.projects(ctx)
	if err != nil {
		return err
	}
	projects = append([]string{""}, projects...)
	pipe := s.c.Pipeline()
	done := make([]*goredis.BoolCmd, len(projects))
	for i, p := range projects {
		done[i] = pipe.SIsMember(ctx, s.keys(p).contradicting(), hintsComplete)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("contradiction hints", err)
	}
	for i, p := range projects {
		if done[i].Val() {
			continue
		}
		if err := s.completeHints(ctx, p); err != nil {
			return s.wrap(fmt.Sprintf("contradiction hints of %q", p), err)
		}
	}
	return nil
}

// completeHints fills a project's hints from its edges, then marks them
// complete.
func (s *Store) completeHints(ctx context.Context, project string) error {
	k := s.keys(project)
	// ZSCAN returns every node that is there for the whole scan (a node
	// updated meanwhile moves in the zset, which would make a ranged
	// read skip another); ids seen twice are harmless.
	var cursor uint64
	for {
		pairs, next, err := s.c.ZScan(ctx, k.all(), cursor, "", 500).Result()
		if err != nil {
			return err
		}
		ids := make([]string, 0, len(pairs)/2)
		for i := 0; i+1 < len(pairs); i += 2 {
			ids = append(ids, pairs[i])
		}
		if err := s.hintNodes(ctx, k, ids); err != nil {
			return err
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	return s.c.SAdd(ctx, k.contradicting(), hintsComplete).Err()
}

// hintNodes adds the nodes among ids that have a contradicts edge to the
// project's hints.
func (s *Store) hintNodes(ctx context.Context, k keys, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	pipe := s.c.Pipeline()
	out := make([]*goredis.StringSliceCmd, len(ids))
	in := make([]*goredis.StringSliceCmd, len(ids))
	for i, id := range ids {
		out[i], in[i] = pipe.HKeys(ctx, k.edgesOut(id)), pipe.HKeys(ctx, k.edgesIn(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	var hinted []any
	for i, id := range ids {
		if hasContradicts(out[i].Val()) || hasContradicts(in[i].Val()) {
			hinted = append(hinted, id)
		}
	}
	if len(hinted) == 0 {
		return nil
	}
	return s.c.SAdd(ctx, k.contradicting(), hinted...).Err()
}

// hasContradicts reports whether edge fields (see liveField, closedField)
// hold a contradicts edge, live or closed.
func hasContradicts(fields []string) bool {
	for _, f := range fields {
		parts := strings.SplitN(f, sep, 3)
		if len(parts) >= 2 && parts[1] == string(memory.Contradicts) {
			return true
		}
	}
	return false
}
