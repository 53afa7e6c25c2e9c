package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// ---- reading nodes ----

// readNode reads one node with c (a client or a WATCHing transaction).
func readNode(ctx context.Context, c goredis.Cmdable, k keys, id string) (memory.Node, error) {
	h, err := c.HGetAll(ctx, k.node(id)).Result()
	if err != nil {
		return memory.Node{}, err
	}
	n, ok, err := decodeNode(h)
	if err != nil {
		return memory.Node{}, err
	}
	if !ok {
		return memory.Node{}, fmt.Errorf("%w: node %s", memory.ErrNotFound, id)
	}
	return n, nil
}

// loadNodes reads the nodes of ids (several projects allowed; one command
// per node, pipelined). Unknown ids are left out of the map. withVector
// false leaves the embedding out: 1.5 KB less per node at 384 dimensions,
// which retrieval and graph walks never read.
func (s *Store) loadNodes(ctx context.Context, ids []string, withVector bool) (map[string]memory.Node, error) {
	refs, err := s.refsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	nodes, err := s.readNodes(ctx, refs, withVector)
	if err != nil {
		return nil, err
	}
	out := make(map[string]memory.Node, len(nodes))
	for _, n := range nodes {
		out[n.ID] = n
	}
	return out, nil
}

// refsOf gives each of ids that names a node the project that holds it,
// in order (the others left out).
func (s *Store) refsOf(ctx context.Context, ids []string) ([]nodeRef, error) {
	projs, err := s.projectsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	refs := make([]nodeRef, 0, len(ids))
	for _, id := range ids {
		if p, ok := projs[id]; ok {
			refs = append(refs, nodeRef{p, id})
		}
	}
	return refs, nil
}

// loadTagNodes reads nodes known to be in one project, in the order of ids
// (missing ones left out).
func (s *Store) loadTagNodes(ctx context.Context, project string, ids []string, withVector bool) ([]memory.Node, error) {
	refs := make([]nodeRef, len(ids))
	for i, id := range ids {
		refs[i] = nodeRef{project, id}
	}
	return s.readNodes(ctx, refs, withVector)
}

// nodeRef is a node id with the project that holds it.
type nodeRef struct{ project, id string }

// readNodes reads the nodes of refs in one pipeline, in order, leaving out
// the missing ones; withVector false leaves the embedding out and reads
// only the packed value (nodes written before packing take a second
// pipeline of their attribute fields).
func (s *Store) readNodes(ctx context.Context, refs []nodeRef, withVector bool) ([]memory.Node, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	pipe := s.c.Pipeline()
	all := make([]*goredis.MapStringStringCmd, len(refs))
	packed := make([]*goredis.SliceCmd, len(refs))
	for i, r := range refs {
		if withVector {
			all[i] = pipe.HGetAll(ctx, s.keys(r.project).node(r.id))
		} else {
			packed[i] = pipe.HMGet(ctx, s.keys(r.project).node(r.id), fPacked)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap("load nodes", err)
	}
	if !withVector {
		vals := make([]packedRead, len(refs))
		for i := range refs {
			// The packed value only: a node without one (written before
			// packing, or missing) is read again by decodePacked. Asking
			// for the id field as well cost every read a field lookup
			// (about a quarter of the HMGET's time at 100,000 nodes).
			if v := packed[i].Val(); len(v) == 1 {
				vals[i].pk, _ = v[0].(string)
			}
			vals[i].idUnread = vals[i].pk == ""
		}
		return s.decodePacked(ctx, refs, vals)
	}
	nodes := make([]memory.Node, len(refs))
	found := make([]bool, len(refs))
	for i := range refs {
		var err error
		if nodes[i], found[i], err = decodeNode(all[i].Val()); err != nil {
			return nil, fmt.Errorf("redis load nodes: node %s: %w", refs[i].id, err)
		}
	}
	return keepFound(nodes, found), nil
}

// readHeads is readNodes without the vectors and the bodies
// (memory.TextStore's GetHeads): with the packed-nodes hashes complete
// (FormatNodeCopies), one HMGET per project instead of one command per
// node. A node without a copy (written before packing, or not there), and
// every node at the base format, is read from its own hash (and its body
// dropped: the heads are the same whichever way they were read).
func (s *Store) readHeads(ctx context.Context, refs []nodeRef) ([]memory.Node, error) {
	nodes, _, err := s.readHeadsHinted(ctx, refs, false)
	return nodes, err
}

// readHeadsHinted is readHeads, and with hinted MayContradict of refs too:
// at FormatNodeCopies in the same pipeline (one round trip for both), at
// the base format beside the node reads.
func (s *Store) readHeadsHinted(ctx context.Context, refs []nodeRef, hinted bool) ([]memory.Node, map[string]bool, error) {
	if len(refs) == 0 {
		return nil, map[string]bool{}, nil
	}
	if !s.nodeCopies(ctx) {
		var (
			hints   map[string]bool
			hintErr error
			wg      sync.WaitGroup
		)
		if hinted {
			wg.Go(func() {
				pipe := s.c.Pipeline()
				h := s.queueHints(ctx, pipe, refs)
				if _, hintErr = pipe.Exec(ctx); hintErr != nil {
					hintErr = s.wrap("contradiction hints", hintErr)
					return
				}
				hints, hintErr = h.result()
			})
		}
		nodes, err := s.readNodes(ctx, refs, false)
		for i := range nodes {
			nodes[i].Body = ""
		}
		wg.Wait()
		if err = errors.Join(err, hintErr); err != nil {
			return nil, nil, err
		}
		return nodes, hints, nil
	}
	nodes := make([]memory.Node, len(refs))
	found := make([]bool, len(refs))
	// Heads this Retrieve read already (the lexical leaders': see
	// fieldsFromHeads) are not read again.
	cache := memory.HeadCacheOf(ctx)
	var projects []string
	byProject := map[string][]int{}
	for i, r := range refs {
		if cache != nil {
			if n, ok := cache.Get(r.id); ok {
				nodes[i], found[i] = n, true
				continue
			}
		}
		if byProject[r.project] == nil {
			projects = append(projects, r.project)
		}
		byProject[r.project] = append(byProject[r.project], i)
	}
	pipe := s.c.Pipeline()
	copies := make([]*goredis.SliceCmd, len(projects))
	for j, p := range projects {
		ids := make([]string, len(byProject[p]))
		for m, i := range byProject[p] {
			ids[m] = refs[i].id
		}
		copies[j] = pipe.HMGet(ctx, s.keys(p).packedNodes(), ids...)
	}
	var h *hintCmds
	if hinted {
		h = s.queueHints(ctx, pipe, refs)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, s.wrap("load heads", err)
	}
	var hints map[string]bool
	if h != nil {
		var err error
		if hints, err = h.result(); err != nil {
			return nil, nil, err
		}
	}
	var rest []nodeRef
	for j, p := range projects {
		got := copies[j].Val()
		if len(got) != len(byProject[p]) {
			return nil, nil, fmt.Errorf("redis load heads: %d copies for %d nodes", len(got), len(byProject[p]))
		}
		for m, v := range got {
			i := byProject[p][m]
			pk, _ := v.(string)
			if pk == "" {
				rest = append(rest, refs[i])
				continue
			}
			var err error
			if nodes[i], err = unpackNode(pk); err != nil {
				return nil, nil, fmt.Errorf("redis load heads: node %s: %w", refs[i].id, err)
			}
			found[i] = true
		}
	}
	if len(rest) > 0 {
		whole, err := s.readNodes(ctx, rest, false)
		if err != nil {
			return nil, nil, err
		}
		byID := make(map[string]memory.Node, len(whole))
		for _, n := range whole {
			n.Body = ""
			byID[n.ID] = n
		}
		for i := range refs {
			if n, ok := byID[refs[i].id]; ok && !found[i] {
				nodes[i], found[i] = n, true
			}
		}
	}
	return keepFound(nodes, found), hints, nil
}

// headCopy is a node's copy in its project's packed-nodes hash: its packed
// value without the body (which ranking never reads, and which is most of
// a long memory's bytes) or the vector.
func headCopy(n *memory.Node) string {
	h := *n
	h.Body, h.Embedding = "", nil
	return packNode(&h)
}

// packedRead is what a node hash answered for its packed value and its id
// field (empty: the field is missing; idUnread: not asked).
type packedRead struct {
	pk, id   string
	idUnread bool
}

// decodePacked unpacks the nodes of refs from what their hashes answered,
// leaving out the missing ones. A node written before packing (no packed
// value, but an id field, or the id field not asked) is read again by its
// attribute fields.
func (s *Store) decodePacked(ctx context.Context, refs []nodeRef, vals []packedRead) ([]memory.Node, error) {
	nodes := make([]memory.Node, len(refs))
	found := make([]bool, len(refs))
	var legacy []int
	for i := range refs {
		switch {
		case vals[i].pk != "":
			var err error
			if nodes[i], err = unpackNode(vals[i].pk); err != nil {
				return nil, fmt.Errorf("redis load nodes: node %s: %w", refs[i].id, err)
			}
			found[i] = true
		case vals[i].id != "" || vals[i].idUnread:
			legacy = append(legacy, i)
		}
	}
	if len(legacy) > 0 {
		// The packed value is asked again: a writer may have packed the
		// node (and dropped its attribute fields) since the first read.
		fields := append([]string{fPacked}, nodeFields...)
		pipe := s.c.Pipeline()
		cmds := make([]*goredis.SliceCmd, len(legacy))
		for j, i := range legacy {
			cmds[j] = pipe.HMGet(ctx, s.keys(refs[i].project).node(refs[i].id), fields...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, s.wrap("load nodes", err)
		}
		for j, i := range legacy {
			var err error
			if nodes[i], found[i], err = decodeNode(fieldsToMap(fields, cmds[j].Val())); err != nil {
				return nil, fmt.Errorf("redis load nodes: node %s: %w", refs[i].id, err)
			}
		}
	}
	return keepFound(nodes, found), nil
}

// keepFound returns the nodes whose found flag is set, in order.
func keepFound(nodes []memory.Node, found []bool) []memory.Node {
	out := nodes[:0]
	for i := range nodes {
		if found[i] {
			out = append(out, nodes[i])
		}
	}
	return out
}

// Get returns the node with id (ErrNotFound when there is none).
func (s *Store) Get(ctx context.Context, id string) (memory.Node, error) {
	p, err := s.projectOf(ctx, id)
	if err != nil {
		return memory.Node{}, err
	}
	n, err := readNode(ctx, s.c, s.keys(p), id)
	if err != nil {
		return memory.Node{}, s.wrap("get", err)
	}
	return n, nil
}

// GetMany returns the nodes that exist, in the order of ids, without
// their embeddings (as SQLite's; PendingEmbeddings reads them).
func (s *Store) GetMany(ctx context.Context, ids []string) ([]memory.Node, error) {
	return s.getMany(ctx, ids, false)
}

// getMany is GetMany, with the embeddings when withVector is set.
func (s *Store) getMany(ctx context.Context, ids []string, withVector bool) ([]memory.Node, error) {
	m, err := s.loadNodes(ctx, ids, withVector)
	if err != nil {
		return nil, err
	}
	out := make([]memory.Node, 0, len(m))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if n, ok := m[id]; ok && !seen[id] {
			seen[id] = true
			out = append(out, n)
		}
	}
	return out, nil
}

// GetHeadsHinted implements memory.HintedHeads: GetHeads and
// MayContradict of ids, at FormatNodeCopies in one pipeline.
func (s *Store) GetHeadsHinted(ctx context.Context, ids []string) ([]memory.Node, map[string]bool, error) {
	refs, err := s.refsOf(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	nodes, hints, err := s.readHeadsHinted(ctx, refs, true)
	if err != nil {
		return nil, nil, err
	}
	return dedupNodes(nodes), hints, nil
}

func dedupNodes(nodes []memory.Node) []memory.Node {
	out := nodes[:0]
	seen := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		if !seen[n.ID] {
			seen[n.ID] = true
			out = append(out, n)
		}
	}
	return out
}

// GetHeads implements memory.TextStore: GetMany without the bodies
// (readHeads: one HMGET per project at FormatNodeCopies; at the base
// format one command per node, as GetMany).
func (s *Store) GetHeads(ctx context.Context, ids []string) ([]memory.Node, error) {
	refs, err := s.refsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	nodes, err := s.readHeads(ctx, refs)
	if err != nil {
		return nil, err
	}
	return dedupNodes(nodes), nil
}

// FillTexts implements memory.TextStore: the body of each of nodes as
// stored (one read of each node's hash, as GetMany). A node rewritten
// since it was read (its digest no longer the stored one) is replaced by
// the stored node, vector left out; a node no longer stored is left as it
// is.
func (s *Store) FillTexts(ctx context.Context, nodes []memory.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	ids := make([]string, len(nodes))
	for i := range nodes {
		ids[i] = nodes[i].ID
	}
	stored, err := s.loadNodes(ctx, ids, false)
	if err != nil {
		return err
	}
	for i := range nodes {
		n, ok := stored[nodes[i].ID]
		switch {
		case !ok:
			nodes[i].ID = "" // no longer stored (memory.TextStore)
		case n.Digest == nodes[i].Digest:
			nodes[i].Body = n.Body
		default:
			nodes[i] = n
		}
	}
	return nil
}

// ---- writing nodes ----

// checkVector validates n's vector (finite, not all zeros, the dimension
// of its model).
func (s *Store) checkVector(ctx context.Context, tx *goredis.Tx, old, n *memory.Node) error {
	if len(n.Embedding) == 0 {
		return nil
	}
	if old != nil && old.EmbeddingModel == n.EmbeddingModel && slices.Equal(old.Embedding, n.Embedding) {
		return nil
	}
	if !finiteVec(n.Embedding) {
		return fmt.Errorf("%w: the embedding of %s holds a value that is not a finite number", memory.ErrInvalid, n.ID)
	}
	zero := true
	for _, x := range n.Embedding {
		if x != 0 {
			zero = false
			break
		}
	}
	if zero {
		return fmt.Errorf("%w: the embedding of %s is all zeros (no direction for cosine)", memory.ErrInvalid, n.ID)
	}
	return s.claimDim(ctx, n.EmbeddingModel, len(n.Embedding))
}

// claimDim checks a vector's dimension against its model's, which the
// first vector of the model fixes for the whole store (one small hash,
// written once per model; a mismatch is ErrInvalid).
func (s *Store) claimDim(ctx context.Context, model string, dim int) error {
	s.mu.Lock()
	d, ok := s.dims[model]
	s.mu.Unlock()
	if !ok {
		key := s.ns + ":{r}:dims"
		if err := s.c.HSetNX(ctx, key, model, dim).Err(); err != nil {
			return err
		}
		v, err := s.c.HGet(ctx, key, model).Int()
		if err != nil {
			return err
		}
		d = v
		s.mu.Lock()
		s.dims[model] = d
		s.mu.Unlock()
	}
	if d != dim {
		return fmt.Errorf("%w: a vector of %d dimensions; model %q has %d", memory.ErrInvalid, dim, model, d)
	}
	return nil
}

// modify applies fn to the stored node id in one optimistic transaction.
func (s *Store) modify(ctx context.Context, op, id string, fn func(old memory.Node) (memory.Node, error)) (memory.Node, error) {
	p, err := s.projectOf(ctx, id)
	if err != nil {
		return memory.Node{}, err
	}
	k := s.keys(p)
	var out memory.Node
	err = s.retryTx(ctx, op, func(tx *goredis.Tx) error {
		old, err := readNode(ctx, tx, k, id)
		if err != nil {
			return err
		}
		n, err := fn(old)
		if err != nil {
			return err
		}
		if n.Digest != old.Digest {
			other, err := tx.HGet(ctx, k.digests(), n.Digest).Result()
			if err != nil && !errors.Is(err, goredis.Nil) {
				return err
			}
			if err == nil && other != id {
				return fmt.Errorf("%w: memory %s already holds this content in the project", memory.ErrRefused, other)
			}
		}
		if err := s.checkVector(ctx, tx, &old, &n); err != nil {
			return err
		}
		if err := s.markReach(ctx, &n); err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			s.writeNode(ctx, pipe, &old, &n)
			return nil
		})
		if err == nil {
			out = n
		}
		return err
	}, k.node(id), k.digests())
	return out, err
}

// Upsert stores n, or reinforces the node of the same digest in its
// project (memory.Reinforce).
func (s *Store) Upsert(ctx context.Context, in memory.Node) (memory.UpsertResult, error) {
	now := s.now()
	n, err := memory.PrepareNew(in, now)
	if err != nil {
		return memory.UpsertResult{}, err
	}
	claimed, err := s.reserve(ctx, "upsert", &n)
	if err != nil {
		return memory.UpsertResult{}, err
	}
	k := s.keys(spaceOf(&n))
	var res memory.UpsertResult
	err = s.retryTx(ctx, "upsert", func(tx *goredis.Tx) error {
		id, err := tx.HGet(ctx, k.digests(), n.Digest).Result()
		if err != nil && !errors.Is(err, goredis.Nil) {
			return err
		}
		if id != "" {
			if err := tx.Watch(ctx, k.node(id)).Err(); err != nil {
				return err
			}
			old, err := readNode(ctx, tx, k, id)
			if err == nil {
				merged := memory.Reinforce(old, n, now)
				if err := s.checkVector(ctx, tx, &old, &merged); err != nil {
					return err
				}
				if err := s.markReach(ctx, &merged); err != nil {
					return err
				}
				_, err = tx.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
					s.writeNode(ctx, pipe, &old, &merged)
					return nil
				})
				if err == nil {
					res = memory.UpsertResult{Node: merged, Created: false}
				}
				return err
			}
			if !errors.Is(err, memory.ErrNotFound) {
				return err
			}
			// A digest entry without its node: store n afresh below.
		}
		if !claimed {
			// The digest was there before the transaction but is gone now:
			// the id is not claimed yet.
			if err := s.claimID(ctx, n.ID, spaceOf(&n)); err != nil {
				return err
			}
		}
		if err := tx.Watch(ctx, k.node(n.ID)).Err(); err != nil {
			return err
		}
		ex, err := tx.Exists(ctx, k.node(n.ID)).Result()
		if err != nil {
			return err
		}
		if ex > 0 {
			return fmt.Errorf("%w: id %s is already used by another memory", memory.ErrInvalid, n.ID)
		}
		if err := s.checkVector(ctx, tx, nil, &n); err != nil {
			return err
		}
		if err := s.markReach(ctx, &n); err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			s.writeNode(ctx, pipe, nil, &n)
			return nil
		})
		if err == nil {
			res = memory.UpsertResult{Node: n, Created: true}
		}
		return err
	}, k.digests())
	if err == nil && !res.Created {
		err = s.mendID(ctx, "upsert", res.Node.ID, spaceOf(&res.Node))
	}
	return res, err
}

// mendID writes id's entry in the id index again after a write reinforced
// its node (on a Redis Cluster only). The entry is on another slot than
// the node (another primary): a failover there can lose it while the node
// stays, and Get by id would not find the node again. A write repeated
// after such a failover (a span extracted again, a consolidator's call
// settled again) finds the node by its digest and mends the entry. Not
// from the id cache, which this process may hold from before the loss; on
// a standalone server both keys are on the one server. After the write's
// transaction: an erasure of the node aborts it (the node is watched).
func (s *Store) mendID(ctx context.Context, op, id, space string) error {
	if _, cluster := s.c.(*goredis.ClusterClient); !cluster {
		return nil
	}
	if err := s.c.HSetNX(ctx, s.idKey(id), id, space).Err(); err != nil {
		return s.wrap(op, err)
	}
	return nil
}

// Update applies a patch (memory.ApplyPatch); a new digest another node of
// the project holds is ErrRefused.
func (s *Store) Update(ctx context.Context, id string, p memory.Patch) (memory.Node, error) {
	return s.modify(ctx, "update", id, func(old memory.Node) (memory.Node, error) {
		return memory.ApplyPatch(old, p, s.now())
	})
}

// Archive hides the node ("forget"); Restore brings it back.
func (s *Store) Archive(ctx context.Context, id string) error {
	now := s.now()
	_, err := s.modify(ctx, "archive", id, func(n memory.Node) (memory.Node, error) {
		return memory.Archive(n, now), nil
	})
	return err
}

// Restore clears the archived mark.
func (s *Store) Restore(ctx context.Context, id string) error {
	now := s.now()
	_, err := s.modify(ctx, "restore", id, func(n memory.Node) (memory.Node, error) {
		return memory.Restore(n, now), nil
	})
	return err
}

// SetEmbedding stores the vector of a node made by model.
func (s *Store) SetEmbedding(ctx context.Context, id, model string, vec []float32) error {
	if model == "" || len(vec) == 0 {
		return fmt.Errorf("%w: an embedding needs a model name and a vector", memory.ErrInvalid)
	}
	_, err := s.modify(ctx, "set embedding", id, func(n memory.Node) (memory.Node, error) {
		n.Embedding = slices.Clone(vec)
		n.EmbeddingModel = model
		return n, nil
	})
	return err
}

// Touch records an access of the nodes: access count +1, accessed-at now.
// Unknown ids are skipped.
func (s *Store) Touch(ctx context.Context, ids []string) error {
	now := s.now().UTC()
	return s.modifyMany(ctx, "touch", ids, func(n memory.Node) (memory.Node, bool) {
		n.Access++
		n.AccessedAt = now
		return n, true
	})
}

// ApplyFeedback applies the verdicts (memory.ApplyVerdict). Unknown ids are
// skipped; an unknown verdict is ErrInvalid and nothing is applied.
func (s *Store) ApplyFeedback(ctx context.Context, verdicts map[string]memory.Verdict) error {
	var bad []string
	ids := make([]string, 0, len(verdicts))
	for id, v := range verdicts {
		if !v.Valid() {
			bad = append(bad, fmt.Sprintf("%s: unknown verdict %q", id, v))
		}
		ids = append(ids, id)
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("%w: feedback: %s", memory.ErrInvalid, strings.Join(bad, "; "))
	}
	now := s.now()
	return s.modifyMany(ctx, "apply feedback", ids, func(n memory.Node) (memory.Node, bool) {
		return memory.ApplyVerdict(n, verdicts[n.ID], now), true
	})
}

// modifyMany applies fn to many nodes: one transaction per project.
func (s *Store) modifyMany(ctx context.Context, op string, ids []string, fn func(memory.Node) (memory.Node, bool)) error {
	projs, err := s.projectsOf(ctx, ids)
	if err != nil {
		return err
	}
	byProject := map[string][]string{}
	for _, id := range ids {
		if p, ok := projs[id]; ok && !slices.Contains(byProject[p], id) {
			byProject[p] = append(byProject[p], id)
		}
	}
	for p, pids := range byProject {
		if _, err := s.modifyTag(ctx, op, p, pids, -1, fn); err != nil {
			return err
		}
	}
	return nil
}

// modifyTag applies fn to nodes of one project in one transaction and
// returns the ids it changed; at most max changes when max >= 0.
func (s *Store) modifyTag(ctx context.Context, op, project string, ids []string, max int,
	fn func(memory.Node) (memory.Node, bool)) ([]string, error) {
	k := s.keys(project)
	watch := make([]string, len(ids))
	for i, id := range ids {
		watch[i] = k.node(id)
	}
	var changed []string
	err := s.retryTx(ctx, op, func(tx *goredis.Tx) error {
		changed = changed[:0]
		cmds := make([]*goredis.MapStringStringCmd, len(ids))
		pipe := tx.Pipeline()
		for i, id := range ids {
			cmds[i] = pipe.HGetAll(ctx, k.node(id))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		type pair struct{ old, n memory.Node }
		var writes []pair
		for _, c := range cmds {
			old, ok, err := decodeNode(c.Val())
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if max >= 0 && len(writes) >= max {
				break
			}
			n, ch := fn(old)
			if ch {
				writes = append(writes, pair{old, n})
				changed = append(changed, n.ID)
			}
		}
		if len(writes) == 0 {
			return nil
		}
		for i := range writes {
			if err := s.markReach(ctx, &writes[i].n); err != nil {
				return err
			}
		}
		_, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			lw := s.tagWrites(k)
			for i := range writes {
				s.writeNodeTo(ctx, p, lw, &writes[i].old, &writes[i].n)
			}
			lw.flush(ctx, p)
			return nil
		})
		return err
	}, watch...)
	return changed, err
}

// MarkStale decays the live memories of project attached to paths
// (memory.MarkStale), at most memory.MaxStalePerCall per call, most recently
// updated first.
func (s *Store) MarkStale(ctx context.Context, pr memory.ProjectRef, paths []string) ([]string, error) {
	projectID := space(pr)
	paths = memory.NormalisePaths(paths)
	if len(paths) == 0 {
		return nil, nil
	}
	k := s.keys(projectID)
	pkeys := make([]string, len(paths))
	for i, p := range paths {
		pkeys[i] = k.path(p)
	}
	ids, err := s.c.SUnion(ctx, pkeys...).Result()
	if err != nil {
		return nil, s.wrap("mark stale", err)
	}
	nodes, err := s.loadTagNodes(ctx, projectID, ids, false)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(nodes, func(a, b memory.Node) int { return memory.CompareTimeline(&a, &b) })
	now := s.now()
	var chosen []string
	for i := range nodes {
		if _, ok := memory.MarkStale(nodes[i], now); ok {
			chosen = append(chosen, nodes[i].ID)
			if len(chosen) == memory.MaxStalePerCall {
				break
			}
		}
	}
	if len(chosen) == 0 {
		return nil, nil
	}
	return s.modifyTag(ctx, "mark stale", projectID, chosen, -1,
		func(n memory.Node) (memory.Node, bool) { return memory.MarkStale(n, now) })
}

// HasLiveMemory reports whether the project or the global memories hold a
// live node.
func (s *Store) HasLiveMemory(ctx context.Context, p memory.ProjectRef) (bool, error) {
	pipe := s.c.Pipeline()
	a := pipe.SCard(ctx, s.keys(space(p)).live())
	b := pipe.SCard(ctx, s.keys(space(memory.ProjectRef{Tenant: p.Tenant})).live())
	if _, err := pipe.Exec(ctx); err != nil {
		return false, s.wrap("has live memory", err)
	}
	return a.Val()+b.Val() > 0, nil
}

// HasPendingEmbeddings checks the project and the global memories: the
// size of each backlog and the models each was embedded by, in one
// pipeline, then, only when a scope was embedded by another model than
// this one, how many nodes that model holds (a script did this in one
// call; plain reads cost the server a fraction of one, and the turn
// asks this every time).
func (s *Store) HasPendingEmbeddings(ctx context.Context, p memory.ProjectRef, model string) (bool, error) {
	pipe := s.c.Pipeline()
	q := s.queuePending(ctx, pipe, p)
	if _, err := pipe.Exec(ctx); err != nil {
		return false, s.wrap("pending embeddings", err)
	}
	return s.finishPending(ctx, q, model)
}

// pendingRead is the first read of HasPendingEmbeddings, queued on a
// pipeline.
type pendingRead struct {
	tags    []string
	backlog []*goredis.IntCmd
	models  []*goredis.StringSliceCmd
}

func (s *Store) queuePending(ctx context.Context, pipe goredis.Pipeliner, p memory.ProjectRef) *pendingRead {
	q := &pendingRead{tags: []string{space(p)}}
	if p.Project != "" {
		q.tags = append(q.tags, space(memory.ProjectRef{Tenant: p.Tenant}))
	}
	q.backlog = make([]*goredis.IntCmd, len(q.tags))
	q.models = make([]*goredis.StringSliceCmd, len(q.tags))
	for i, t := range q.tags {
		k := s.keys(t)
		q.backlog[i] = pipe.ZCard(ctx, k.pending())
		q.models[i] = pipe.SMembers(ctx, k.models())
	}
	return q
}

func (q *pendingRead) cmds() []goredis.Cmder {
	var out []goredis.Cmder
	for i := range q.tags {
		out = append(out, q.backlog[i], q.models[i])
	}
	return out
}

// finishPending is the rest of HasPendingEmbeddings once the reads of q
// succeeded.
func (s *Store) finishPending(ctx context.Context, q *pendingRead, model string) (bool, error) {
	tags, backlog, models := q.tags, q.backlog, q.models
	for i := range tags {
		if backlog[i].Val() > 0 {
			return true, nil
		}
	}
	if s.pendingHook != nil {
		s.pendingHook()
	}
	// A write between the two reads may move a node from another model's
	// set to the backlog (a content change drops its vector): the second
	// read counts each backlog again, after the models' sets (the move is
	// atomic, so a node that left a set it read is in a backlog it reads).
	var others []*goredis.IntCmd
	pipe := s.c.Pipeline()
	for i, t := range tags {
		for _, m := range models[i].Val() {
			if m != model {
				others = append(others, pipe.ZCard(ctx, s.keys(t).embedded(m)))
			}
		}
	}
	if len(others) == 0 {
		return false, nil
	}
	for _, t := range tags {
		others = append(others, pipe.ZCard(ctx, s.keys(t).pending()))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return false, s.wrap("pending embeddings", err)
	}
	for _, c := range others {
		if c.Val() > 0 {
			return true, nil
		}
	}
	return false, nil
}

// PendingEmbeddings lists live nodes without a vector of model, oldest
// created first, from every project (limit <= 0: memory.DefaultChannelLimit).
func (s *Store) PendingEmbeddings(ctx context.Context, model string, limit int) ([]memory.Node, error) {
	limit = memory.Limit(limit)
	projects, err := s.projects(ctx)
	if err != nil {
		return nil, err
	}
	projects = append([]string{""}, projects...)
	type cand struct {
		id, project string
		score       float64
	}
	var cands []cand
	for _, p := range projects {
		k := s.keys(p)
		models, err := s.c.SMembers(ctx, k.models()).Result()
		if err != nil {
			return nil, s.wrap("pending embeddings", err)
		}
		srcs := []string{k.pending()}
		for _, m := range models {
			if m != model {
				srcs = append(srcs, k.embedded(m))
			}
		}
		pipe := s.c.Pipeline()
		cmds := make([]*goredis.ZSliceCmd, len(srcs))
		for i, src := range srcs {
			cmds[i] = pipe.ZRangeWithScores(ctx, src, 0, int64(limit-1))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, s.wrap("pending embeddings", err)
		}
		for _, c := range cmds {
			for _, z := range c.Val() {
				cands = append(cands, cand{z.Member.(string), p, z.Score})
			}
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if a.score != b.score {
			if a.score < b.score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
	ids := make([]string, 0, limit)
	for _, c := range cands {
		if len(ids) == limit {
			break
		}
		if !slices.Contains(ids, c.id) {
			ids = append(ids, c.id)
			s.projOf.put(c.id, c.project)
		}
	}
	nodes, err := s.getMany(ctx, ids, true)
	if err != nil {
		return nil, err
	}
	out := nodes[:0]
	for _, n := range nodes {
		if n.Live() && (len(n.Embedding) == 0 || n.EmbeddingModel != model) {
			out = append(out, n)
		}
	}
	return out, nil
}

// reserve prepares the write of n: its project is registered and, unless
// the project already holds n's digest (the write will reinforce that
// node), n's id is claimed for the project. It reports whether it claimed.
func (s *Store) reserve(ctx context.Context, op string, n *memory.Node) (bool, error) {
	sp := spaceOf(n)
	if err := s.register(ctx, sp); err != nil {
		return false, err
	}
	existing, err := s.c.HGet(ctx, s.keys(sp).digests(), n.Digest).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return false, s.wrap(op, err)
	}
	if existing != "" {
		return false, nil
	}
	return true, s.claimID(ctx, n.ID, sp)
}

// DigestOwners implements memory.DigestOwners: one HMGET of the project's
// digest index, then the nodes (with their vectors, so that a caller that
// rewrites one keeps it).
func (s *Store) DigestOwners(ctx context.Context, p memory.ProjectRef, digests []string) (map[string]memory.Node, error) {
	out := make(map[string]memory.Node)
	if len(digests) == 0 {
		return out, nil
	}
	vals, err := s.c.HMGet(ctx, s.keys(space(p)).digests(), digests...).Result()
	if err != nil {
		return nil, s.wrap("digest owners", err)
	}
	var ids []string
	for _, v := range vals {
		if id, ok := v.(string); ok && id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	nodes, err := s.getMany(ctx, ids, true)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		out[n.Digest] = n
	}
	return out, nil
}
