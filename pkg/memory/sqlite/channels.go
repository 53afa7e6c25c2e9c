package sqlite

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/vecindex"
)

// Lexical implements memory.Channels: BM25 (k1 1.2, b 0.75) over label, body,
// paths and entity names, from the in-memory index. Terms are re-tokenised
// with memory.Terms; a term of 3 or more characters also matches up to 32
// longer tokens it prefixes, counted as one term.
func (s *Store) Lexical(ctx context.Context, terms []string, f memory.Filter, limit int) ([]memory.Scored, error) {
	terms = memory.Terms(strings.Join(terms, " "))
	if len(terms) == 0 {
		return nil, nil
	}
	s.awaitProject(ctx, memory.ProjectRef{Tenant: f.TenantID, Project: f.ProjectID})
	now := s.now()
	t := scoredTop{k: memory.Limit(limit)}
	x := s.idx
	x.mu.RLock()
	defer x.mu.RUnlock()
	tenant, ok := x.strs.lookup(f.TenantID)
	if !ok {
		return nil, nil // no memory of the tenant was ever indexed
	}
	sc := x.scratch.get()
	defer x.scratch.put(sc)
	sc.tenant = tenant // the tenant's statistics (tenants.go)
	gf := x.compile(&f, now)
	more := func() bool { return len(t.items) < t.k }
	accept := func(rid uint32) bool { return x.pass(rid, &gf) }
	visit := func(rid uint32, score float64) bool {
		if len(t.items) == t.k {
			// Cannot enter: skip the filter check. Ties with the last
			// are common (same term, same length) and lose on the id.
			last := &t.items[len(t.items)-1]
			if score < last.score {
				return false // nothing scoring less can enter either
			}
			if score == last.score && x.idCmp(rid, last.rid) >= 0 {
				return true
			}
		}
		if x.pass(rid, &gf) {
			t.add(scoredItem{rid: rid, id: x.heads[rid].id, score: score})
		}
		return true
	}
	if size := x.scopes.visibleSize(&f); size == 0 {
		return nil, nil // nothing to see
	} else if float64(size) <= visibleShare*float64(x.lex.nDocs) && x.lex.postingsOf(terms, tenant) > visiblePostings*size {
		// The filter sees a small part of the store (scopes.go), and the
		// query's lists are long against it: only those documents are
		// scored (short lists are read whole faster than the documents
		// are marked).
		vis := sc.markVisible(x.scopes.visible(&f, sc.vis), len(x.lex.docLen))
		sc.vis = vis
		defer sc.unmarkVisible()
		if left := x.lex.searchVisible(terms, sc, t.k, vis, more, visit); left && len(t.items) < t.k {
			t.items = t.items[:0]
			x.lex.searchVisible(terms, sc, 0, vis, nil, visit)
		}
		return t.scored(), nil
	}
	if left := x.lex.search(terms, sc, t.k, accept, more, visit); left && len(t.items) < t.k {
		// The filter rejected documents the rarer terms matched, and
		// documents only the common terms match may pass: every term
		// scored (the Redis store does the same).
		t.items = t.items[:0]
		x.lex.search(terms, sc, 0, accept, nil, visit)
	}
	return t.scored(), nil
}

// Vector implements memory.Channels: cosine similarity from the model's
// in-memory vector index (pkg/memory/vecindex), filtered while searching.
// Only positive similarities are candidates. While a background load is
// still loading the memories it finds nothing; until the graph is built
// it is an exact scan.
func (s *Store) Vector(ctx context.Context, model string, vec []float32, f memory.Filter, limit int) ([]memory.Scored, error) {
	limit = memory.Limit(limit)
	s.awaitProject(ctx, memory.ProjectRef{Tenant: f.TenantID, Project: f.ProjectID})
	now := s.now()
	x := s.idx
	x.mu.RLock()
	defer x.mu.RUnlock()
	if ok, err := x.checkQuery(model, vec); !ok {
		return nil, err
	}
	if x.loading && !x.bulk {
		// While the memories load, the channel is left out: an exact scan
		// reads every loaded vector (150 MB at 100,000) per query, holding
		// the index lock the load needs, on the CPU the load is using; the
		// turn is answered from BM25, paths and standing instructions.
		return nil, nil
	}
	gf := x.compile(&f, now)
	var hits []vecindex.Hit
	if size := x.scopes.visibleSize(&f); size <= vectorAmongMax && float64(size) <= visibleShare*float64(x.lex.nDocs) {
		// The filter sees few of the store's memories (scopes.go): their
		// exact cosines, instead of a graph walk that would pass over the
		// others (and, failing to find enough, scan every vector).
		hits = x.vectorAmong(model, vec, limit, x.scopes.visible(&f, nil), &gf)
	} else if fl := x.flat[model]; fl != nil {
		hits = fl.search(vec, limit, func(rid uint32) bool { return x.pass(rid, &gf) })
	} else {
		// The graph carries each vector's rid: the filter reads the
		// node's gate directly, with no id look-up per node walked.
		hits = x.vecs[model].SearchTagged(vec, limit, func(rid uint32) bool { return x.pass(rid, &gf) })
	}
	out := make([]memory.Scored, 0, len(hits))
	for _, h := range hits {
		if h.Score > 0 {
			out = append(out, memory.Scored{ID: h.ID, Score: float64(h.Score)})
		}
	}
	return out, nil
}

// vectorAmongMax is the most memories a filter may see for the vector
// channel to score them all (vectorAmong: an id look-up and a dot product
// each; not measured against the graph walk here, whose filtered search
// falls back to scanning every vector when its filter takes fewer than 1
// in 50, see pkg/memory/vecindex).
const vectorAmongMax = 4096

// vectorAmong is the vector channel over the documents vis: the exact
// cosines of those the filter takes, the limit best, best first (ties by
// id, as the graph's search).
func (x *index) vectorAmong(model string, vec []float32, limit int, vis []uint32, gf *gateFilter) []vecindex.Hit {
	ids := make([]string, 0, len(vis))
	for _, rid := range vis {
		if x.pass(rid, gf) {
			ids = append(ids, x.heads[rid].id)
		}
	}
	var hits []vecindex.Hit
	if fl := x.flat[model]; fl != nil {
		hits = fl.similarities(vec, ids)
	} else if ix := x.vecs[model]; ix != nil {
		hits = ix.Similarities(vec, ids)
	}
	slices.SortFunc(hits, func(a, b vecindex.Hit) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	return hits[:min(limit, len(hits))]
}

// VectorScores implements memory.VectorScorer: exact cosines from the
// in-memory vectors (the graph's, or the exact scan's while it is built).
func (s *Store) VectorScores(ctx context.Context, model string, vec []float32, ids []string) ([]memory.Scored, error) {
	x := s.idx
	x.mu.RLock()
	defer x.mu.RUnlock()
	if ok, err := x.checkQuery(model, vec); !ok || len(ids) == 0 {
		return nil, err
	}
	var hits []vecindex.Hit
	if fl := x.flat[model]; fl != nil {
		hits = fl.similarities(vec, ids)
	} else {
		hits = x.vecs[model].Similarities(vec, ids)
	}
	out := make([]memory.Scored, len(hits))
	for i, h := range hits {
		out[i] = memory.Scored{ID: h.ID, Score: float64(h.Score)}
	}
	return out, nil
}

// ByPaths implements memory.Channels.
func (s *Store) ByPaths(ctx context.Context, paths []string, f memory.Filter, limit int) ([]memory.Scored, error) {
	paths = memory.NormalisePaths(paths)
	if len(paths) == 0 {
		return nil, nil
	}
	s.awaitProject(ctx, memory.ProjectRef{Tenant: f.TenantID, Project: f.ProjectID})
	limit = memory.Limit(limit)
	rows, err := s.db.QueryContext(ctx, `SELECT rid, count(*) FROM node_paths WHERE path IN (`+placeholders(len(paths))+`) GROUP BY rid`, anySlice(paths)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: by paths: %w", err)
	}
	type cand struct {
		rid   uint32
		count int
	}
	var cands []cand
	for rows.Next() {
		var c cand
		if err := rows.Scan(&c.rid, &c.count); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlite: by paths: %w", err)
		}
		cands = append(cands, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: by paths: %w", err)
	}
	now := s.now()
	type hit struct {
		h     *head
		count int
	}
	var hits []hit
	s.idx.mu.RLock()
	gf := s.idx.compile(&f, now)
	for _, c := range cands {
		if s.idx.pass(c.rid, &gf) {
			hits = append(hits, hit{s.idx.heads[c.rid], c.count})
		}
	}
	s.idx.mu.RUnlock()
	slices.SortFunc(hits, func(a, b hit) int {
		if a.count != b.count {
			return b.count - a.count
		}
		return s.idx.compareTimeline(a.h, b.h)
	})
	out := make([]memory.Scored, 0, min(limit, len(hits)))
	for _, h := range hits[:min(limit, len(hits))] {
		out = append(out, memory.Scored{ID: h.h.id, Score: float64(h.count)})
	}
	return out, nil
}
