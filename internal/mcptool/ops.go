package mcptool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/pkg/memory"
)

// recall is precise-mode hybrid retrieval with the injector's ranking
// (memory.Retrieve with graph expansion and the injector's confidence
// floor), refused while the project's memories wait for embeddings, as
// the injector refuses to build recall then. The hits count as accesses.
func (t *Tool) recall(ctx context.Context, c Caller, op Op) (Result, error) {
	query := strings.TrimSpace(memory.Redact(op.Query))
	var bad []string
	if query == "" {
		bad = append(bad, "a query is required")
	}
	limit, err := bounded("limit", op.Limit, DefaultRecall, MaxRecall)
	if err != nil {
		bad = append(bad, err.Error())
	}
	cross := false
	switch op.Scope {
	case "", ScopeProject:
	case ScopeAll:
		if !t.cfg.CrossProject {
			bad = append(bad, "scope all is off here (cross-project recall is disabled): use scope project")
		}
		cross = true
	default:
		bad = append(bad, fmt.Sprintf("scope %q: want project or all", op.Scope))
	}
	var kinds []memory.Subkind
	if op.Kind != "" {
		if k := memory.Subkind(op.Kind); !k.Valid() {
			bad = append(bad, fmt.Sprintf("kind %q: want one of %s", op.Kind, subkindNames()))
		} else {
			kinds = []memory.Subkind{k}
		}
	}
	if len(bad) > 0 {
		return Result{}, fmt.Errorf("%w: %s", memory.ErrInvalid, strings.Join(bad, "; "))
	}
	model := t.emb.Model()
	pending, err := t.store.HasPendingEmbeddings(ctx, c.ref().ProjectRef(), model)
	if err != nil {
		return Result{}, fmt.Errorf("readiness: %w", err)
	}
	if pending {
		return Result{}, errors.New(inject.SkipNotReady + "; try again shortly")
	}
	vecs, err := t.emb.Embed(ctx, []string{query})
	if err != nil || len(vecs) != 1 {
		// Lexical-only hits would look complete and not be: refuse instead.
		return Result{}, fmt.Errorf("%s: %v", inject.SkipEmbedFailed, errOr(err, "no vector"))
	}
	now := t.now()
	hits, err := memory.Retrieve(ctx, t.store, memory.Query{
		Text:   query,
		Vector: vecs[0],
		Model:  model,
		Filter: memory.Filter{TenantID: c.Tenant, ProjectID: c.Project, SessionID: c.Session, CrossProject: cross,
			MinConfidence: t.cfg.MinConfidence, Subkinds: kinds},
		Limit:   limit,
		Expand:  true,
		Precise: true,
		Now:     now,
		Ranking: t.cfg.Ranking,
		Explain: op.Explain,
	})
	if err != nil {
		return Result{}, err
	}
	r := Result{Memories: make([]Memory, 0, len(hits))}
	ids := make([]string, len(hits))
	for i := range hits {
		m := t.memoryOf(&hits[i].Node, c)
		m.Score, m.Why = hits[i].Score, hits[i].Why
		r.Memories = append(r.Memories, m)
		ids[i] = hits[i].ID
	}
	if len(ids) > 0 {
		if err := t.store.Touch(ctx, ids); err != nil {
			r.Note = "the accesses were not recorded: " + describe(err)
		}
	}
	return r, nil
}

// update replaces a memory's text (label, body, kind). The source becomes
// the agent, a user-sourced memory's too (the patch names its writer,
// memory.ApplyPatch); the authority never rises (an agent cannot turn an
// inference into a user's rule) and a user's rule becomes the assistant's
// (an edited text is no longer what the user said). The memory is re-embedded at once; if that fails it
// waits in the embedding backlog (the extractor embeds it).
func (t *Tool) update(ctx context.Context, c Caller, op Op) (Result, error) {
	if op.Label == nil && op.Body == nil && op.Subkind == "" {
		return Result{}, fmt.Errorf("%w: update needs a label, a body or a subkind", memory.ErrInvalid)
	}
	if _, err := t.load(ctx, c, op.ID, true); err != nil {
		return Result{}, err
	}
	agent := memory.SourceAgent
	p := memory.Patch{Source: &agent}
	if op.Label != nil {
		s := memory.Redact(*op.Label)
		p.Label = &s
	}
	if op.Body != nil {
		s := memory.Redact(*op.Body)
		p.Body = &s
	}
	if op.Subkind != "" {
		k := memory.Subkind(op.Subkind)
		p.Subkind = &k
	}
	n, err := t.store.Update(ctx, strings.TrimSpace(op.ID), p)
	if err != nil {
		return Result{}, err
	}
	r := Result{}
	if n.EmbeddingModel != t.emb.Model() {
		if err := t.embed(ctx, &n); err != nil {
			r.Note = "re-embedding failed; the memory waits for its vector in the embedding backlog: " + describe(err)
		}
	}
	m := t.memoryOf(&n, c)
	r.Memory = &m
	return r, nil
}

func (t *Tool) embed(ctx context.Context, n *memory.Node) error {
	vecs, err := t.emb.Embed(ctx, []string{memory.EmbedText(n)})
	if err != nil {
		return err
	}
	if len(vecs) != 1 {
		return fmt.Errorf("%d vectors for 1 text", len(vecs))
	}
	if err := t.store.SetEmbedding(ctx, n.ID, t.emb.Model(), vecs[0]); err != nil {
		return err
	}
	n.EmbeddingModel = t.emb.Model()
	return nil
}

// neighbours walks the graph from a memory (memory.Graph.Neighbours) and
// shows what the caller may see of it.
func (t *Tool) neighbours(ctx context.Context, c Caller, op Op) (Result, error) {
	hops := op.Hops
	if hops == 0 {
		hops = 1
	}
	if err := memory.CheckHops(hops); err != nil {
		return Result{}, err
	}
	start, err := t.load(ctx, c, op.ID, false)
	if err != nil {
		return Result{}, err
	}
	nbs, err := t.store.Neighbours(ctx, start.ID, hops, t.readFilter(c, true))
	if err != nil {
		return Result{}, err
	}
	r := Result{Memories: make([]Memory, 0, len(nbs))}
	for i := range nbs {
		nb := &nbs[i]
		m := t.memoryOf(&nb.Node, c)
		m.Depth, m.Relation = nb.Depth, nb.Edge.Relation
		m.Via = nb.Edge.Src
		if m.Via == nb.Node.ID {
			m.Via = nb.Edge.Dst
		}
		r.Memories = append(r.Memories, m)
	}
	return r, nil
}

// timeline lists memories newest update first: those written in this
// session by default, or the project's (and global ones) updated in
// [since, until).
func (t *Tool) timeline(ctx context.Context, c Caller, op Op) (Result, error) {
	limit, err := bounded("limit", op.Limit, DefaultTimeline, MaxTimeline)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %v", memory.ErrInvalid, err)
	}
	f := t.readFilter(c, false)
	if op.Since == "" && op.Until == "" {
		if c.Session == "" {
			return Result{}, fmt.Errorf("%w: no session here (engram mcp -session, or ?session= on HTTP): give a time range (since, until)", memory.ErrInvalid)
		}
		nodes, err := t.store.Timeline(ctx, memory.TimelineQuery{Filter: f, OnlySession: true, Limit: limit})
		if err != nil {
			return Result{}, err
		}
		return t.nodes(nodes, c), nil
	}
	since, err := parseTime("since", op.Since)
	if err != nil {
		return Result{}, err
	}
	until, err := parseTime("until", op.Until)
	if err != nil {
		return Result{}, err
	}
	if !until.IsZero() && !since.Before(until) {
		return Result{}, fmt.Errorf("%w: since %s is not before until %s", memory.ErrInvalid, since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	nodes, err := t.store.Timeline(ctx, memory.TimelineQuery{Filter: f, Limit: TimelineScan})
	if err != nil {
		return Result{}, err
	}
	var in []memory.Node
	for _, n := range nodes {
		if !n.UpdatedAt.Before(since) && (until.IsZero() || n.UpdatedAt.Before(until)) {
			in = append(in, n)
			if len(in) == limit {
				break
			}
		}
	}
	r := t.nodes(in, c)
	if len(nodes) == TimelineScan && len(in) < limit {
		r.Note = fmt.Sprintf("only the %d most recently updated memories were searched", TimelineScan)
	}
	return r, nil
}

func (t *Tool) nodes(ns []memory.Node, c Caller) Result {
	r := Result{Memories: make([]Memory, 0, len(ns))}
	for i := range ns {
		r.Memories = append(r.Memories, t.memoryOf(&ns[i], c))
	}
	return r
}

// link adds an edge from -> to. A supersedes link goes through the
// supersede rules (memory.CheckSupersede: the newer memory, from, needs at
// least the older one's authority and scope) and closes the older one.
func (t *Tool) link(ctx context.Context, c Caller, op Op) (Result, error) {
	rel := memory.Relation(op.Relation)
	if !rel.Valid() {
		return Result{}, fmt.Errorf("%w: relation %q: want one of %s", memory.ErrInvalid, op.Relation, relationNames())
	}
	from, err := t.load(ctx, c, op.From, true)
	if err != nil {
		return Result{}, fmt.Errorf("from: %w", err)
	}
	to, err := t.load(ctx, c, op.To, true)
	if err != nil {
		return Result{}, fmt.Errorf("to: %w", err)
	}
	if rel == memory.Supersedes {
		if err := t.store.Supersede(ctx, to.ID, from.ID); err != nil {
			return Result{}, err
		}
		return Result{Edge: &EdgeInfo{From: from.ID, To: to.ID, Relation: rel}}, nil
	}
	e, err := t.store.Link(ctx, memory.Edge{Src: from.ID, Dst: to.ID, Relation: rel, Source: memory.SourceAgent})
	if err != nil {
		return Result{}, err
	}
	return Result{Edge: &EdgeInfo{From: e.Src, To: e.Dst, Relation: e.Relation, Weight: e.Weight}}, nil
}

// forget archives a memory (never deletes it: restore brings it back).
// The reason is required and goes to the log, with who forgot what.
func (t *Tool) forget(ctx context.Context, c Caller, op Op) (Result, error) {
	reason := strings.TrimSpace(memory.Redact(op.Reason))
	if reason == "" {
		return Result{}, fmt.Errorf("%w: forget needs a reason", memory.ErrInvalid)
	}
	n, err := t.load(ctx, c, op.ID, true)
	if err != nil {
		return Result{}, err
	}
	if err := t.store.Archive(ctx, n.ID); err != nil {
		return Result{}, err
	}
	t.log.Info("memory forgotten through the memory tool", zap.String("id", n.ID), zap.String("tenant", c.Tenant), zap.String("project", c.Project),
		zap.String("session", c.Session), zap.String("principal", c.Principal), zap.String("reason", reason))
	if n, err = t.store.Get(ctx, n.ID); err != nil {
		return Result{}, err
	}
	m := t.memoryOf(&n, c)
	return Result{Memory: &m}, nil
}

// restore brings a memory back: archived, superseded or closed, it is live
// again (memory.Restore), and the supersedes edges into it are unlinked. A
// retried restore finishes what a failed one left.
func (t *Tool) restore(ctx context.Context, c Caller, op Op) (Result, error) {
	n, err := t.load(ctx, c, op.ID, true)
	if err != nil {
		return Result{}, err
	}
	if err := t.store.Restore(ctx, n.ID); err != nil {
		return Result{}, err
	}
	edges, err := t.store.Edges(ctx, n.ID)
	if err != nil {
		return Result{}, fmt.Errorf("restored, but its supersedes edges were not read: %w", err)
	}
	for _, e := range edges {
		if e.Relation == memory.Supersedes && e.Dst == n.ID && e.Live() {
			if err := t.store.Unlink(ctx, e.Src, e.Dst, e.Relation); err != nil && !memory.IsNotFound(err) {
				return Result{}, fmt.Errorf("restored, but the edge %s supersedes %s was not unlinked: %w", e.Src, e.Dst, err)
			}
		}
	}
	if n, err = t.store.Get(ctx, n.ID); err != nil {
		return Result{}, err
	}
	m := t.memoryOf(&n, c)
	return Result{Memory: &m}, nil
}

// stats counts what the project sees and says where the session's
// consolidation (the cursor) and compaction (the latest summary) are.
func (t *Tool) stats(ctx context.Context, c Caller) (Result, error) {
	counts, err := t.store.Count(ctx, c.ref().ProjectRef(), t.emb.Model())
	if err != nil {
		return Result{}, err
	}
	s := &Stats{Project: c.Project, Counts: counts, Ready: counts.Pending == 0}
	if c.Session != "" {
		ss := &SessionStats{ID: c.Session}
		ref := c.ref()
		cur, err := t.store.Cursor(ctx, ref)
		if err != nil {
			return Result{}, fmt.Errorf("consolidation cursor: %w", err)
		}
		if cur > 0 {
			ss.LastConsolidation = &Mark{UpToMessage: cur}
			msgs, err := t.store.Messages(ctx, ref, cur-1, 1)
			if err != nil {
				return Result{}, fmt.Errorf("consolidation cursor's message: %w", err)
			}
			if len(msgs) == 1 && msgs[0].ID == cur {
				ss.LastConsolidation.At = msgs[0].CreatedAt
			}
		}
		sum, err := t.store.LatestSummary(ctx, ref)
		switch {
		case err == nil:
			ss.LastCompaction = &Mark{UpToMessage: sum.UpTo, At: sum.CreatedAt}
		case !memory.IsNotFound(err):
			return Result{}, fmt.Errorf("latest summary: %w", err)
		}
		s.Session = ss
	}
	return Result{Stats: s}, nil
}

// parseTime reads an RFC 3339 time ("" is the zero time).
func parseTime(name, v string) (time.Time, error) {
	if strings.TrimSpace(v) == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(v))
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s %q is not an RFC 3339 time (like 2026-05-01T00:00:00Z)", memory.ErrInvalid, name, v)
	}
	return t, nil
}

// bounded is v within [1, max], def when 0.
func bounded(name string, v, def, max int) (int, error) {
	if v == 0 {
		return def, nil
	}
	if v < 1 || v > max {
		return 0, fmt.Errorf("%s %d: want 1-%d", name, v, max)
	}
	return v, nil
}

func errOr(err error, msg string) string {
	if err != nil {
		return err.Error()
	}
	return msg
}

func subkindNames() string {
	s := make([]string, len(memory.Subkinds))
	for i, k := range memory.Subkinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

func relationNames() string {
	s := make([]string, len(memory.Relations))
	for i, r := range memory.Relations {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}
