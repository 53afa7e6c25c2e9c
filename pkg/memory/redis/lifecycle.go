package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// supersedeEdge is the newID -supersedes-> oldID edge after linking it
// (again) given the current live one.
func (s *Store) supersedeEdge(cur memory.Edge, exists bool, newID, oldID string) (memory.Edge, error) {
	e, err := memory.PrepareEdge(memory.Edge{Src: newID, Dst: oldID, Relation: memory.Supersedes}, s.now())
	if err != nil {
		return memory.Edge{}, err
	}
	if exists {
		return memory.Relink(cur, e), nil
	}
	return e, nil
}

// Supersede closes oldID (memory.Close) and links newID -supersedes-> oldID.
// Both in one project (or both global): one transaction. Across projects
// the edge is written first and the close last, each step atomic, so a
// retry after a crash completes it.
func (s *Store) Supersede(ctx context.Context, oldID, newID string) error {
	if oldID == newID {
		return fmt.Errorf("%w: memory %s cannot supersede itself", memory.ErrInvalid, oldID)
	}
	projs, err := s.nodeProjects(ctx, oldID, newID)
	if err != nil {
		return err
	}
	po, pn := projs[0], projs[1]
	if po != pn {
		old, err := s.Get(ctx, oldID)
		if err != nil {
			return err
		}
		newer, err := s.Get(ctx, newID)
		if err != nil {
			return err
		}
		if err := memory.CheckSupersede(old, newer); err != nil {
			return err
		}
		if _, err := s.Link(ctx, memory.Edge{Src: newID, Dst: oldID, Relation: memory.Supersedes}); err != nil {
			return err
		}
		now := s.now()
		_, err = s.modify(ctx, "supersede", oldID, func(o memory.Node) (memory.Node, error) {
			if err := memory.CheckSupersede(o, newer); err != nil {
				return memory.Node{}, err
			}
			return memory.Close(o, newID, now), nil
		})
		return err
	}
	k := s.keys(po)
	return s.retryTx(ctx, "supersede", func(tx *goredis.Tx) error {
		old, err := readNode(ctx, tx, k, oldID)
		if err != nil {
			return err
		}
		newer, err := readNode(ctx, tx, k, newID)
		if err != nil {
			return err
		}
		if err := memory.CheckSupersede(old, newer); err != nil {
			return err
		}
		closed := memory.Close(old, newID, s.now())
		cur, ok, err := liveEdge(ctx, tx, k, newID, oldID, memory.Supersedes)
		if err != nil {
			return err
		}
		e, err := s.supersedeEdge(cur, ok, newID, oldID)
		if err != nil {
			return err
		}
		if err := s.markReach(ctx, &closed); err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			s.writeNode(ctx, pipe, &old, &closed)
			s.writeEdge(ctx, pipe, po, po, e, false)
			return nil
		})
		return err
	}, k.node(oldID), k.node(newID), k.digests(), k.edgesOut(newID), k.edgesIn(oldID))
}

// Revise stores the revision of oldID (memory.PrepareRevision, upserted:
// a revision to an existing memory reinforces it), closes the old node and
// links new -supersedes-> old, in one transaction when both are in one
// project.
func (s *Store) Revise(ctx context.Context, oldID string, in memory.Node) (memory.Node, error) {
	old, err := s.Get(ctx, oldID)
	if err != nil {
		return memory.Node{}, err
	}
	now := s.now()
	n, err := memory.PrepareRevision(old, in, now)
	if err != nil {
		return memory.Node{}, err
	}
	if spaceOf(&n) != spaceOf(&old) {
		res, err := s.Upsert(ctx, n)
		if err != nil {
			return memory.Node{}, err
		}
		if err := s.Supersede(ctx, oldID, res.Node.ID); err != nil {
			return memory.Node{}, err
		}
		return s.Get(ctx, res.Node.ID)
	}
	claimed, err := s.reserve(ctx, "revise", &n)
	if err != nil {
		return memory.Node{}, err
	}
	k := s.keys(spaceOf(&old))
	var out memory.Node
	err = s.retryTx(ctx, "revise", func(tx *goredis.Tx) error {
		o, err := readNode(ctx, tx, k, oldID)
		if err != nil {
			return err
		}
		id, err := tx.HGet(ctx, k.digests(), n.Digest).Result()
		if err != nil && !errors.Is(err, goredis.Nil) {
			return err
		}
		var prev *memory.Node
		next := n
		if id != "" {
			if err := tx.Watch(ctx, k.node(id)).Err(); err != nil {
				return err
			}
			x, err := readNode(ctx, tx, k, id)
			if err == nil {
				if x.ID == oldID {
					return fmt.Errorf("%w: the revision of %s does not change it", memory.ErrInvalid, oldID)
				}
				prev = &x
				next = memory.Reinforce(x, n, now)
			} else if !errors.Is(err, memory.ErrNotFound) {
				return err
			}
		}
		if prev == nil {
			if !claimed {
				if err := s.claimID(ctx, n.ID, spaceOf(&n)); err != nil {
					return err
				}
			}
			if err := tx.Watch(ctx, k.node(n.ID)).Err(); err != nil {
				return err
			}
		}
		if err := memory.CheckSupersede(o, next); err != nil {
			return err
		}
		if err := s.checkVector(ctx, tx, prev, &next); err != nil {
			return err
		}
		if err := tx.Watch(ctx, k.edgesOut(next.ID), k.edgesIn(oldID)).Err(); err != nil {
			return err
		}
		cur, ok, err := liveEdge(ctx, tx, k, next.ID, oldID, memory.Supersedes)
		if err != nil {
			return err
		}
		e, err := s.supersedeEdge(cur, ok, next.ID, oldID)
		if err != nil {
			return err
		}
		closed := memory.Close(o, next.ID, now)
		if err := s.markReach(ctx, &next, &closed); err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			s.writeNode(ctx, pipe, prev, &next)
			s.writeNode(ctx, pipe, &o, &closed)
			s.writeEdge(ctx, pipe, spaceOf(&old), spaceOf(&old), e, false)
			return nil
		})
		if err == nil {
			out = next
		}
		return err
	}, k.node(oldID), k.digests())
	return out, err
}

// Timeline lists nodes newest update first under the filter rules
// (memory.Visible, or memory.AsOfVisible for an as-of read).
func (s *Store) Timeline(ctx context.Context, q memory.TimelineQuery) ([]memory.Node, error) {
	limit := memory.Limit(q.Limit)
	tags, err := s.scopeTags(ctx, q.Filter)
	if err != nil {
		return nil, err
	}
	now := s.now()
	keep := func(n *memory.Node) bool {
		if q.OnlySession && n.SessionID != q.SessionID {
			return false
		}
		if !q.AsOf.IsZero() {
			return memory.AsOfVisible(n, q.Filter, q.AsOf)
		}
		return memory.Visible(n, q.Filter, now)
	}
	var all []memory.Node
	for _, t := range tags {
		got, err := s.scanTag(ctx, t.project, limit, keep)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
	}
	slices.SortFunc(all, func(a, b memory.Node) int { return memory.CompareTimeline(&a, &b) })
	if len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

// scanTag walks a project's timeline (newest first) until it has limit
// nodes that keep accepts.
func (s *Store) scanTag(ctx context.Context, project string, limit int, keep func(*memory.Node) bool) ([]memory.Node, error) {
	k := s.keys(project)
	batch := int64(max(2*limit, 64))
	var out []memory.Node
	for start := int64(0); len(out) < limit; start += batch {
		ids, err := s.c.ZRevRange(ctx, k.all(), start, start+batch-1).Result()
		if err != nil {
			return nil, s.wrap("timeline", err)
		}
		nodes, err := s.loadTagNodes(ctx, project, ids, true)
		if err != nil {
			return nil, err
		}
		for i := range nodes {
			if keep(&nodes[i]) {
				out = append(out, nodes[i])
				if len(out) == limit {
					break
				}
			}
		}
		if int64(len(ids)) < batch {
			break
		}
	}
	return out, nil
}

// StandingInstructions selects the standing instructions of a project and
// the global ones (memory.StandingFor), in memory.CompareStanding order.
func (s *Store) StandingInstructions(ctx context.Context, pr memory.ProjectRef, limit int) ([]memory.Node, error) {
	// Two plain round trips (this runs on every turn, beside recall's
	// reads on the same server, which take longer): the lists, then their
	// nodes. A script per list that answered the ids with their nodes'
	// packed values saved the second round trip, but cost the server two
	// to three times as much: its replies turned into Lua values and back.
	pipe := s.c.Pipeline()
	q := s.queueStanding(ctx, pipe, pr, limit)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap("standing instructions", err)
	}
	return s.finishStanding(ctx, q)
}

// standingRead is the first read of StandingInstructions, queued on a
// pipeline.
type standingRead struct {
	pr       memory.ProjectRef
	limit    int
	projects []string
	lists    []*goredis.StringSliceCmd
}

func (s *Store) queueStanding(ctx context.Context, pipe goredis.Pipeliner, pr memory.ProjectRef, limit int) *standingRead {
	q := &standingRead{pr: pr, limit: limit, projects: []string{space(pr)}}
	if pr.Project != "" {
		q.projects = append(q.projects, space(memory.ProjectRef{Tenant: pr.Tenant}))
	}
	stop := int64(-1)
	if limit > 0 {
		stop = int64(limit + 16 - 1) // a margin for same-millisecond ties
	}
	q.lists = make([]*goredis.StringSliceCmd, len(q.projects))
	for i, p := range q.projects {
		q.lists[i] = pipe.ZRange(ctx, s.keys(p).standing(), 0, stop)
	}
	return q
}

// finishStanding reads the nodes of the lists q read (each of which
// succeeded) and selects the instructions.
func (s *Store) finishStanding(ctx context.Context, q *standingRead) ([]memory.Node, error) {
	var refs []nodeRef
	for i, p := range q.projects {
		for _, id := range q.lists[i].Val() {
			refs = append(refs, nodeRef{p, id})
		}
	}
	nodes, err := s.readNodes(ctx, refs, false)
	if err != nil {
		return nil, err
	}
	var all []memory.Node
	for i := range nodes {
		if memory.StandingFor(&nodes[i], q.pr) {
			all = append(all, nodes[i])
		}
	}
	return memory.SortStanding(all, q.limit), nil
}

// StandingAndPending is StandingInstructions and HasPendingEmbeddings of a
// project (the turn's standing selection and readiness gate) with their
// first reads in one pipeline: a round trip fewer a turn. Each answer
// comes with its own error, as the two calls give them.
func (s *Store) StandingAndPending(ctx context.Context, pr memory.ProjectRef, limit int, model string) (standing []memory.Node, standingErr error, pending bool, pendingErr error) {
	pipe := s.c.Pipeline()
	sq := s.queueStanding(ctx, pipe, pr, limit)
	pq := s.queuePending(ctx, pipe, pr)
	_, _ = pipe.Exec(ctx) // each command's error is checked below
	for _, c := range sq.lists {
		if err := c.Err(); err != nil {
			standingErr = s.wrap("standing instructions", err)
			break
		}
	}
	for _, c := range pq.cmds() {
		if err := c.Err(); err != nil {
			pendingErr = s.wrap("pending embeddings", err)
			break
		}
	}
	var wg sync.WaitGroup
	if standingErr == nil {
		wg.Go(func() { standing, standingErr = s.finishStanding(ctx, sq) })
	}
	if pendingErr == nil {
		pending, pendingErr = s.finishPending(ctx, pq, model)
	}
	wg.Wait()
	return standing, standingErr, pending, pendingErr
}

// PutBatch writes nodes by id (replacing) and edges (replacing the live
// edge of the same ends and relation); everything is validated first. All
// or nothing per project: one transaction per project, then the edges that
// cross projects.
func (s *Store) PutBatch(ctx context.Context, nodes []memory.Node, edges []memory.Edge) error {
	now := s.now()
	var bad, refused []string
	prepared := make([]memory.Node, 0, len(nodes))
	given := map[string]bool{}
	for i, in := range nodes {
		n, err := memory.PrepareNew(in, now)
		if err != nil {
			bad = append(bad, fmt.Sprintf("node %d (%s): %v", i, in.ID, err))
			continue
		}
		// An id given twice is refused, as by the SQLite store: the
		// batch's posting script indexed every copy against the one
		// stored memory (the earlier copy's words kept postings and the
		// corpus counted it twice; conformance PutBatch/SameIDTwice).
		if n.ID != "" {
			if given[n.ID] {
				bad = append(bad, fmt.Sprintf("node %d: duplicate id %s", i, n.ID))
				continue
			}
			given[n.ID] = true
		}
		prepared = append(prepared, n)
	}
	projOf := map[string]string{}
	digests := map[string]string{} // project \x1f digest -> id
	for _, n := range prepared {
		sp := spaceOf(&n)
		if p, ok := projOf[n.ID]; ok && p != sp {
			bad = append(bad, fmt.Sprintf("node %s is given in two projects", n.ID))
		}
		projOf[n.ID] = sp
		dk := sp + sep + n.Digest
		if other, ok := digests[dk]; ok && other != n.ID {
			refused = append(refused, fmt.Sprintf("nodes %s and %s hold the same content (digest %s)", other, n.ID, n.Digest))
		}
		digests[dk] = n.ID
	}
	preparedEdges := make([]memory.Edge, 0, len(edges))
	var unknown []string
	for i, in := range edges {
		e, err := memory.PrepareEdge(in, now)
		if err != nil {
			bad = append(bad, fmt.Sprintf("edge %d: %v", i, err))
			continue
		}
		preparedEdges = append(preparedEdges, e)
		for _, id := range []string{e.Src, e.Dst} {
			if _, ok := projOf[id]; !ok && !slices.Contains(unknown, id) {
				unknown = append(unknown, id)
			}
		}
	}
	// Stored ids: their project (an id cannot move) and the edge ends.
	var ids []string
	for _, n := range prepared {
		ids = append(ids, n.ID)
	}
	stored, err := s.projectsOf(ctx, append(ids, unknown...))
	if err != nil {
		return err
	}
	for _, n := range prepared {
		switch p, ok := stored[n.ID]; {
		case ok && unspace(p).Tenant != n.TenantID:
			bad = append(bad, fmt.Sprintf("node %s belongs to another tenant", n.ID))
		case ok && p != spaceOf(&n):
			bad = append(bad, fmt.Sprintf("node %s belongs to project %q, not %q", n.ID, unspace(p).Project, n.ProjectID))
		}
	}
	if len(unknown) > 0 {
		pipe := s.c.Pipeline()
		ex := map[string]*goredis.IntCmd{}
		for _, id := range unknown {
			if p, ok := stored[id]; ok {
				ex[id] = pipe.Exists(ctx, s.keys(p).node(id))
			}
		}
		if len(ex) > 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return s.wrap("put batch", err)
			}
		}
		for _, id := range unknown {
			if c, ok := ex[id]; !ok || c.Val() == 0 {
				bad = append(bad, fmt.Sprintf("edge end %s is neither in the batch nor stored", id))
			} else {
				projOf[id] = stored[id]
			}
		}
	}
	// No edge between two tenants.
	for _, e := range preparedEdges {
		ps, ok1 := projOf[e.Src]
		pd, ok2 := projOf[e.Dst]
		if ok1 && ok2 && unspace(ps).Tenant != unspace(pd).Tenant {
			bad = append(bad, fmt.Sprintf("edge %s -> %s links two tenants", e.Src, e.Dst))
		}
	}
	// Digests another stored node of the project holds.
	byProject := map[string][]memory.Node{}
	for _, n := range prepared {
		sp := spaceOf(&n)
		byProject[sp] = append(byProject[sp], n)
	}
	for p, ns := range byProject {
		fields := make([]string, len(ns))
		for i, n := range ns {
			fields[i] = n.Digest
		}
		vals, err := s.c.HMGet(ctx, s.keys(p).digests(), fields...).Result()
		if err != nil {
			return s.wrap("put batch", err)
		}
		for i, v := range vals {
			if id, ok := v.(string); ok && id != ns[i].ID && !batchReplaces(byProject[p], id, ns[i].Digest) {
				refused = append(refused, fmt.Sprintf("node %s: memory %s already holds this content in the project", ns[i].ID, id))
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: put batch: %s", memory.ErrInvalid, strings.Join(append(bad, refused...), "; "))
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: put batch: %s", memory.ErrRefused, strings.Join(refused, "; "))
	}

	// Write: per project, nodes and the edges inside it in one transaction.
	edgesIn := map[string][]memory.Edge{}
	var crossing []memory.Edge
	for _, e := range preparedEdges {
		if projOf[e.Src] == projOf[e.Dst] {
			edgesIn[projOf[e.Src]] = append(edgesIn[projOf[e.Src]], e)
		} else {
			crossing = append(crossing, e)
		}
	}
	projects := map[string]bool{}
	for p := range byProject {
		projects[p] = true
	}
	for p := range edgesIn {
		projects[p] = true
	}
	for p := range projects {
		if err := s.register(ctx, p); err != nil {
			return err
		}
		ids := make([]string, len(byProject[p]))
		for i, n := range byProject[p] {
			ids[i] = n.ID
		}
		if err := s.claimIDs(ctx, ids, p); err != nil {
			return err
		}
		if err := s.putTag(ctx, p, byProject[p], edgesIn[p]); err != nil {
			return err
		}
	}
	if len(crossing) > 0 {
		// Edges between projects: the copies first, the primaries last.
		pipe := s.c.Pipeline()
		for _, e := range crossing {
			s.writeEdgeIn(ctx, pipe, projOf[e.Dst], e, false)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return s.wrap("put batch", err)
		}
		pipe = s.c.Pipeline()
		for _, e := range crossing {
			s.writeEdgeOut(ctx, pipe, projOf[e.Src], e, false)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return s.wrap("put batch", err)
		}
	}
	return nil
}

// batchReplaces reports whether the batch itself rewrites node id with
// another digest (so its old digest is free).
func batchReplaces(batch []memory.Node, id, digest string) bool {
	for _, n := range batch {
		if n.ID == id {
			return n.Digest != digest
		}
	}
	return false
}

func (s *Store) putTag(ctx context.Context, project string, nodes []memory.Node, edges []memory.Edge) error {
	k := s.keys(project)
	// The statistics are WATCHed too: the postings are scored here, with
	// the ones read (scoredTagWrites).
	watch := []string{k.digests(), k.stats()}
	for _, n := range nodes {
		watch = append(watch, k.node(n.ID))
	}
	return s.retryTx(ctx, "put batch", func(tx *goredis.Tx) error {
		pipe := tx.Pipeline()
		cmds := make([]*goredis.MapStringStringCmd, len(nodes))
		for i, n := range nodes {
			cmds[i] = pipe.HGetAll(ctx, k.node(n.ID))
		}
		st := pipe.HMGet(ctx, k.stats(), "n", "l")
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		olds := make([]*memory.Node, len(nodes))
		dims := map[string]int{}
		for i, c := range cmds {
			o, ok, err := decodeNode(c.Val())
			if err != nil {
				return err
			}
			if ok {
				olds[i] = &o
			}
			n := nodes[i]
			if len(n.Embedding) == 0 {
				continue
			}
			if d, ok := dims[n.EmbeddingModel]; ok {
				if d != len(n.Embedding) {
					return fmt.Errorf("%w: put batch: model %q vectors of %d and %d dimensions",
						memory.ErrInvalid, n.EmbeddingModel, d, len(n.Embedding))
				}
				continue
			}
			dims[n.EmbeddingModel] = len(n.Embedding)
			if err := s.checkVector(ctx, tx, olds[i], &nodes[i]); err != nil {
				return err
			}
		}
		for i := range nodes {
			if err := s.markReach(ctx, &nodes[i]); err != nil {
				return err
			}
		}
		_, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			lw := s.scoredTagWrites(k, statValue(st.Val(), 0), statValue(st.Val(), 1))
			if s.scoreInScript {
				lw = newTagWrites(k)
			}
			for i := range nodes {
				s.writeNodeTo(ctx, p, lw, olds[i], &nodes[i])
			}
			lw.flush(ctx, p)
			for _, e := range edges {
				s.writeEdge(ctx, p, project, project, e, false)
			}
			return nil
		})
		return err
	}, watch...)
}

// statValue is field i of an HMGET of the statistics as the posting
// script reads it (tonumber, or 0).
func statValue(v []any, i int) float64 {
	if i >= len(v) {
		return 0
	}
	str, _ := v[i].(string)
	f, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return 0
	}
	return f
}

// Scan calls node for every node (vectors included) and edge for every
// edge (closed ones too), project by project.
func (s *Store) Scan(ctx context.Context, node func(memory.Node) error, edge func(memory.Edge) error) error {
	projects, err := s.projects(ctx)
	if err != nil {
		return err
	}
	slices.Sort(projects)
	projects = append([]string{""}, projects...)
	const batch = 500
	for _, p := range projects {
		k := s.keys(p)
		for start := int64(0); ; start += batch {
			ids, err := s.c.ZRange(ctx, k.all(), start, start+batch-1).Result()
			if err != nil {
				return s.wrap("scan", err)
			}
			nodes, err := s.loadTagNodes(ctx, p, ids, true)
			if err != nil {
				return err
			}
			if node != nil {
				for _, n := range nodes {
					if err := node(n); err != nil {
						return err
					}
				}
			}
			if edge != nil && len(ids) > 0 {
				pipe := s.c.Pipeline()
				cmds := make([]*goredis.MapStringStringCmd, len(ids))
				for i, id := range ids {
					cmds[i] = pipe.HGetAll(ctx, k.edgesOut(id))
				}
				if _, err := pipe.Exec(ctx); err != nil {
					return s.wrap("scan", err)
				}
				for _, c := range cmds {
					var es []memory.Edge
					for _, v := range c.Val() {
						e, err := decodeEdge(v)
						if err != nil {
							return err
						}
						es = append(es, e)
					}
					slices.SortFunc(es, compareEdges)
					for _, e := range es {
						if err := edge(e); err != nil {
							return err
						}
					}
				}
			}
			if len(ids) < batch {
				break
			}
		}
	}
	return nil
}
