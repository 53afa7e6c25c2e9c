package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/engram-memory/engram/pkg/memory"
)

// Upsert implements memory.Nodes.
func (s *Store) Upsert(ctx context.Context, n memory.Node) (memory.UpsertResult, error) {
	p, err := memory.PrepareNew(n, s.now())
	if err != nil {
		return memory.UpsertResult{}, err
	}
	var res memory.UpsertResult
	err = s.write(ctx, func(w *wtx) error {
		res, err = w.upsert(p)
		return err
	})
	return res, err
}

// Update implements memory.Nodes.
func (s *Store) Update(ctx context.Context, id string, p memory.Patch) (memory.Node, error) {
	return s.modify(ctx, id, func(w *wtx, n memory.Node) (memory.Node, error) {
		out, err := memory.ApplyPatch(n, p, w.now)
		if err != nil {
			return memory.Node{}, err
		}
		if out.Digest != n.Digest {
			other, _, found, err := w.byDigest(memory.ProjectOf(&out), out.Digest)
			if err != nil {
				return memory.Node{}, err
			}
			if found && other.ID != n.ID {
				return memory.Node{}, fmt.Errorf("%w: memory %s already holds this text", memory.ErrRefused, other.ID)
			}
		}
		return out, nil
	})
}

// Archive implements memory.Nodes.
func (s *Store) Archive(ctx context.Context, id string) error {
	_, err := s.modify(ctx, id, func(w *wtx, n memory.Node) (memory.Node, error) { return memory.Archive(n, w.now), nil })
	return err
}

// Restore implements memory.Nodes.
func (s *Store) Restore(ctx context.Context, id string) error {
	_, err := s.modify(ctx, id, func(w *wtx, n memory.Node) (memory.Node, error) { return memory.Restore(n, w.now), nil })
	return err
}

// Supersede implements memory.Nodes.
func (s *Store) Supersede(ctx context.Context, oldID, newID string) error {
	return s.write(ctx, func(w *wtx) error {
		old, rid, err := w.get(oldID)
		if err != nil {
			return err
		}
		newer, _, err := w.get(newID)
		if err != nil {
			return err
		}
		if err := memory.CheckSupersede(old, newer); err != nil {
			return err
		}
		if _, err := w.put(rid, &old, memory.Close(old, newID, w.now)); err != nil {
			return err
		}
		_, err = w.link(memory.Edge{Src: newID, Dst: oldID, Relation: memory.Supersedes, Source: newer.Source})
		return err
	})
}

// Revise implements memory.Nodes.
func (s *Store) Revise(ctx context.Context, oldID string, n memory.Node) (memory.Node, error) {
	var out memory.Node
	err := s.write(ctx, func(w *wtx) error {
		old, rid, err := w.get(oldID)
		if err != nil {
			return err
		}
		p, err := memory.PrepareRevision(old, n, w.now)
		if err != nil {
			return err
		}
		res, err := w.upsert(p)
		if err != nil {
			return err
		}
		out = res.Node
		if _, err := w.put(rid, &old, memory.Close(old, out.ID, w.now)); err != nil {
			return err
		}
		_, err = w.link(memory.Edge{Src: out.ID, Dst: oldID, Relation: memory.Supersedes, Source: out.Source})
		return err
	})
	return out, err
}

// SetEmbedding implements memory.Nodes.
func (s *Store) SetEmbedding(ctx context.Context, id, model string, vec []float32) error {
	if err := s.idx.checkVector(model, vec); err != nil {
		return err
	}
	_, err := s.modify(ctx, id, func(w *wtx, n memory.Node) (memory.Node, error) {
		n.Embedding, n.EmbeddingModel = slices.Clone(vec), model
		return n, nil
	})
	return err
}

// PendingEmbeddings implements memory.Nodes.
func (s *Store) PendingEmbeddings(ctx context.Context, model string, limit int) ([]memory.Node, error) {
	limit = memory.Limit(limit)
	s.idx.mu.RLock()
	backlog := false
	for p := range s.idx.liveBy {
		if s.idx.pending(p, model) {
			backlog = true
			break
		}
	}
	if !backlog {
		s.idx.mu.RUnlock()
		return nil, nil
	}
	top := newTop(limit, s.idx.compareCreated)
	for rid, h := range s.idx.heads {
		if h != nil && h.live() && s.idx.strs.str(h.model) != model {
			top.add(uint32(rid), h)
		}
	}
	s.idx.mu.RUnlock()
	return s.byRids(ctx, top.rids())
}

// HasPendingEmbeddings implements memory.Nodes (from the in-memory counts).
func (s *Store) HasPendingEmbeddings(ctx context.Context, p memory.ProjectRef, model string) (bool, error) {
	if err := s.memRead(ctx); err != nil {
		return false, fmt.Errorf("sqlite: has pending embeddings: %w", err)
	}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	return s.idx.pending(p, model) || s.idx.pending(memory.ProjectRef{Tenant: p.Tenant}, model), nil
}

// HasLiveMemory implements memory.Nodes.
func (s *Store) HasLiveMemory(ctx context.Context, p memory.ProjectRef) (bool, error) {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	return s.idx.liveBy[p] > 0 || s.idx.liveBy[memory.ProjectRef{Tenant: p.Tenant}] > 0, nil
}

// Timeline implements memory.Nodes.
func (s *Store) Timeline(ctx context.Context, q memory.TimelineQuery) ([]memory.Node, error) {
	s.awaitProject(ctx, memory.ProjectRef{Tenant: q.TenantID, Project: q.ProjectID})
	now := s.now()
	top := newTop(memory.Limit(q.Limit), s.idx.compareTimeline)
	s.idx.mu.RLock()
	var n memory.Node
	for rid, h := range s.idx.heads {
		if s.idx.visible(&n, h, &q, now) {
			top.add(uint32(rid), h)
		}
	}
	s.idx.mu.RUnlock()
	return s.byRids(ctx, top.rids())
}

// StandingInstructions implements memory.Nodes.
func (s *Store) StandingInstructions(ctx context.Context, p memory.ProjectRef, limit int) ([]memory.Node, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	if err := s.memRead(ctx); err != nil {
		return nil, fmt.Errorf("sqlite: standing instructions: %w", err)
	}
	s.awaitProject(ctx, p)
	// merge the two sorted lists (the project's and its tenant's global one)
	s.idx.mu.RLock()
	own, global := s.idx.standing[p], s.idx.standing[memory.ProjectRef{Tenant: p.Tenant}]
	if p.Project == "" {
		own = nil
	}
	var rids []uint32
	for len(rids) < limit && (len(own) > 0 || len(global) > 0) {
		if len(global) == 0 || (len(own) > 0 && s.idx.compareStanding(s.idx.heads[own[0]], s.idx.heads[global[0]]) < 0) {
			rids, own = append(rids, own[0]), own[1:]
		} else {
			rids, global = append(rids, global[0]), global[1:]
		}
	}
	// Served from the heads, like GetMany: this runs on every turn.
	out := s.idx.copyHeads(make([]memory.Node, 0, len(rids)), rids)
	s.idx.mu.RUnlock()
	return out, nil
}

// ApplyFeedback implements memory.Nodes.
func (s *Store) ApplyFeedback(ctx context.Context, verdicts map[string]memory.Verdict) error {
	var bad []string
	for id, v := range verdicts {
		if !v.Valid() {
			bad = append(bad, fmt.Sprintf("%s: unknown verdict %q", id, v))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("%w: feedback: %s", memory.ErrInvalid, strings.Join(bad, "; "))
	}
	ids := sortedKeys(verdicts)
	return s.write(ctx, func(w *wtx) error {
		for _, id := range ids {
			n, rid, err := w.get(id)
			if errors.Is(err, memory.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if _, err := w.put(rid, &n, memory.ApplyVerdict(n, verdicts[id], w.now)); err != nil {
				return err
			}
		}
		return nil
	})
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// MarkStale implements memory.Nodes.
func (s *Store) MarkStale(ctx context.Context, pr memory.ProjectRef, paths []string) ([]string, error) {
	paths = memory.NormalisePaths(paths)
	if len(paths) == 0 {
		return nil, nil
	}
	var marked []string
	err := s.write(ctx, func(w *wtx) error {
		rows, err := w.tx.QueryContext(w.ctx, `SELECT DISTINCT n.rid, `+nodeCols+` FROM node_paths p JOIN nodes n ON n.rid = p.rid LEFT JOIN node_vectors v ON v.rid = n.rid
			WHERE n.tenant = ? AND n.project = ? AND p.path IN (`+placeholders(len(paths))+`)`, append([]any{pr.Tenant, pr.Project}, anySlice(paths)...)...)
		if err != nil {
			return fmt.Errorf("sqlite: mark stale: %w", err)
		}
		type cand struct {
			rid int64
			n   memory.Node
		}
		var cands []cand
		for rows.Next() {
			var c cand
			if c.n, err = scanNode(rows, &c.rid); err != nil {
				rows.Close()
				return fmt.Errorf("sqlite: mark stale: %w", err)
			}
			cands = append(cands, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlite: mark stale: %w", err)
		}
		slices.SortFunc(cands, func(a, b cand) int { return memory.CompareTimeline(&a.n, &b.n) })
		for _, c := range cands {
			if len(marked) == memory.MaxStalePerCall {
				break
			}
			n, ok := memory.MarkStale(c.n, w.now)
			if !ok {
				continue
			}
			if _, err := w.put(c.rid, &c.n, n); err != nil {
				return err
			}
			marked = append(marked, n.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return marked, nil
}

// Touch implements memory.Nodes.
func (s *Store) Touch(ctx context.Context, ids []string) error {
	return s.write(ctx, func(w *wtx) error {
		for _, id := range ids {
			n, rid, err := w.get(id)
			if errors.Is(err, memory.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			old := n
			n.Access++
			n.AccessedAt = w.now
			if _, err := w.put(rid, &old, n); err != nil {
				return err
			}
		}
		return nil
	})
}

// PutBatch implements memory.Nodes.
func (s *Store) PutBatch(ctx context.Context, nodes []memory.Node, edges []memory.Edge) error {
	now := s.now()
	var bad []string
	prepared := make([]memory.Node, 0, len(nodes))
	inBatch := map[string]bool{}
	digests := map[[3]string]string{}
	dims := map[string]int{}
	var conflict error
	for i, n := range nodes {
		if n.ID == "" {
			n.ID = memory.NewID()
		}
		p, err := memory.PrepareNew(n, now)
		if err != nil {
			bad = append(bad, fmt.Sprintf("node %d (%s): %v", i, n.ID, err))
			continue
		}
		if len(p.Embedding) > 0 {
			if err := s.idx.checkVector(p.EmbeddingModel, p.Embedding); err != nil {
				bad = append(bad, fmt.Sprintf("node %d (%s): %v", i, n.ID, err))
				continue
			}
			if d, ok := dims[p.EmbeddingModel]; ok && d != len(p.Embedding) {
				bad = append(bad, fmt.Sprintf("node %d (%s): %d-dimension vector, other nodes of model %s have %d", i, n.ID, len(p.Embedding), p.EmbeddingModel, d))
				continue
			}
			dims[p.EmbeddingModel] = len(p.Embedding)
		}
		if inBatch[p.ID] {
			bad = append(bad, fmt.Sprintf("node %d: duplicate id %s", i, p.ID))
			continue
		}
		inBatch[p.ID] = true
		key := [3]string{p.TenantID, p.ProjectID, p.Digest}
		if other, ok := digests[key]; ok && conflict == nil {
			conflict = fmt.Errorf("%w: nodes %s and %s hold the same text", memory.ErrRefused, other, p.ID)
		}
		digests[key] = p.ID
		prepared = append(prepared, p)
	}
	preparedEdges := make([]memory.Edge, 0, len(edges))
	for i, e := range edges {
		p, err := memory.PrepareEdge(e, now)
		if err != nil {
			bad = append(bad, fmt.Sprintf("edge %d (%s -> %s): %v", i, e.Src, e.Dst, err))
			continue
		}
		preparedEdges = append(preparedEdges, p)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: batch: %s", memory.ErrInvalid, strings.Join(bad, "; "))
	}
	if conflict != nil {
		return conflict
	}
	tenantOf := make(map[string]string, len(prepared))
	for i := range prepared {
		tenantOf[prepared[i].ID] = prepared[i].TenantID
	}
	return s.write(ctx, func(w *wtx) error {
		// The stored rows of the batch's ids, read once (rid 0: new).
		olds := make([]memory.Node, len(prepared))
		rids := make([]int64, len(prepared))
		for i, p := range prepared {
			// An id stays in its tenant: a batch may not move another
			// tenant's node into its own (the lexical index counts a
			// document's statistics for its tenant: tenants.go).
			old, rid, err := w.get(p.ID)
			switch {
			case err == nil && old.TenantID != p.TenantID:
				return fmt.Errorf("%w: batch: node %s belongs to another tenant", memory.ErrInvalid, p.ID)
			case err == nil:
				olds[i], rids[i] = old, rid
			case !errors.Is(err, memory.ErrNotFound):
				return err
			}
		}
		for _, e := range preparedEdges {
			var tenants [2]string
			for i, end := range []string{e.Src, e.Dst} {
				if inBatch[end] {
					tenants[i] = tenantOf[end]
					continue
				}
				n, _, err := w.get(end)
				if err != nil {
					if errors.Is(err, memory.ErrNotFound) {
						return fmt.Errorf("%w: batch: edge %s -> %s: node %s is neither in the batch nor stored", memory.ErrInvalid, e.Src, e.Dst, end)
					}
					return err
				}
				tenants[i] = n.TenantID
			}
			if tenants[0] != tenants[1] {
				return fmt.Errorf("%w: batch: edge %s -> %s links two tenants", memory.ErrInvalid, e.Src, e.Dst)
			}
		}
		for i, p := range prepared {
			other, _, found, err := w.byDigest(memory.ProjectOf(&p), p.Digest)
			if err != nil {
				return err
			}
			if found && other.ID != p.ID && !inBatch[other.ID] {
				return fmt.Errorf("%w: batch: node %s holds the text of stored memory %s", memory.ErrRefused, p.ID, other.ID)
			}
			if found && other.ID != p.ID {
				// the other node is rewritten later in this batch: move it out of the way
				if _, err := w.exec(`UPDATE nodes SET digest = digest || '~' || rid WHERE id = ?`, other.ID); err != nil {
					return err
				}
			}
			// The digest update above leaves a row's id and document
			// alone: the row read before is still the stored one.
			if rids[i] == 0 {
				_, err = w.put(0, nil, p)
			} else {
				_, err = w.put(rids[i], &olds[i], p)
			}
			if err != nil {
				return err
			}
		}
		for _, e := range preparedEdges {
			if err := w.putEdge(e); err != nil {
				return err
			}
		}
		return nil
	})
}

// Scan implements memory.Nodes.
func (s *Store) Scan(ctx context.Context, node func(memory.Node) error, edge func(memory.Edge) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT `+nodeCols+` FROM `+nodeFrom+` ORDER BY n.rid`)
	if err != nil {
		return fmt.Errorf("sqlite: scan: %w", err)
	}
	for rows.Next() {
		n, err := scanNode(rows, nil)
		if err == nil {
			err = node(n)
		}
		if err != nil {
			rows.Close()
			return err
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return fmt.Errorf("sqlite: scan: %w", err)
	}
	erows, err := s.db.QueryContext(ctx, `SELECT `+edgeCols+` FROM edges ORDER BY eid`)
	if err != nil {
		return fmt.Errorf("sqlite: scan: %w", err)
	}
	defer erows.Close()
	for erows.Next() {
		e, err := scanEdge(erows)
		if err == nil {
			err = edge(e)
		}
		if err != nil {
			return err
		}
	}
	if err := erows.Err(); err != nil {
		return fmt.Errorf("sqlite: scan: %w", err)
	}
	return nil
}

// DigestOwners implements memory.DigestOwners.
func (s *Store) DigestOwners(ctx context.Context, p memory.ProjectRef, digests []string) (map[string]memory.Node, error) {
	out := make(map[string]memory.Node)
	for i := 0; i < len(digests); i += 500 {
		chunk := digests[i:min(i+500, len(digests))]
		args := make([]any, 0, len(chunk)+2)
		args = append(args, p.Tenant, p.Project)
		for _, d := range chunk {
			args = append(args, d)
		}
		rows, err := s.db.QueryContext(ctx, `SELECT `+nodeCols+` FROM `+nodeFrom+` WHERE n.tenant = ? AND n.project = ? AND n.digest IN (?`+
			strings.Repeat(",?", len(chunk)-1)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("sqlite: digest owners: %w", err)
		}
		for rows.Next() {
			n, err := scanNode(rows, nil)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlite: digest owners: %w", err)
			}
			out[n.Digest] = n
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("sqlite: digest owners: %w", err)
		}
	}
	return out, nil
}
