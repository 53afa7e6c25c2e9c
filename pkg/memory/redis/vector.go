package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// Vector is cosine similarity on the vector set of model (nodes embedded
// by another model are not in that set). Scores are cosine similarities;
// only positive ones are returned.
//
// VSIM is sent as a plain command, not from a script: so called, Redis
// runs the HNSW search on a thread of its own and the server's main thread
// keeps serving other work (the lexical channel of the same turn, other
// turns) meanwhile. At 100,000 nodes that search is about 2 ms, most of the
// channel. VSIM's own FILTER is exact but slow in Redis 8.0 (it parses
// every visited element's JSON attributes: about 20-30 ms at 10,000
// elements even when nearly all pass), so Vector asks for more neighbours
// than needed, unfiltered, reads their filter fields (one HMGET of the vis
// hash per scope tag) and keeps the visible ones (memory.Visible itself),
// widening the search four times over while too few pass; only a heavily
// filtered query falls back to VSIM FILTER with the attributes
// (vectorAttrs, vectorFilter). Every round is one pipeline over the scope
// tags.
func (s *Store) Vector(ctx context.Context, model string, vec []float32, f memory.Filter, limit int) ([]memory.Scored, error) {
	limit = memory.Limit(limit)
	if err := checkQuery(model, vec); err != nil {
		return nil, err
	}
	tags, err := s.scopeTags(ctx, f)
	if err != nil {
		return nil, err
	}
	if noSubkinds(f) {
		return nil, nil
	}
	now := s.now()
	blob := &goredis.VectorFP32{Val: encodeVector(vec)}
	ef := int64(max(2*limit, 100))
	widest := int64(max(16*limit, 1000))
	subsets := s.reachReads(ctx)
	reads := make([]*vecRead, len(tags))
	for i, t := range tags {
		k := s.keys(t.project)
		set := k.vectors(model)
		if subsets && t.kind == tagForeign {
			// Another project's nodes of reach anywhere only (reach.go):
			// in its whole set, few of the nearest would pass the filter,
			// and the search would widen, then fall back to VSIM FILTER.
			set = k.anywhereVectors(model)
		}
		reads[i] = &vecRead{tag: t, keys: k, set: set, count: int64(limit + limit/2 + 8)}
	}
	var all []memory.Scored
	for pending := reads; len(pending) > 0; {
		pipe := s.c.Pipeline()
		for _, r := range pending {
			_, small := s.smallSets.Load(r.set)
			r.sim = pipe.VSimWithArgsWithScores(ctx, r.set, blob,
				&goredis.VSimArgs{Count: r.count, EF: max(ef, r.count), NoThread: small})
		}
		// A missing vector set (no node of the project has a vector of
		// the model) answers an empty result.
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, s.vectorErr(err)
		}
		pipe = s.c.Pipeline()
		for _, r := range pending {
			r.res = r.sim.Val()
			s.noteSetSize(r.set, int64(len(r.res)) < r.count && len(r.res) <= smallSet)
			r.queueVis(ctx, pipe)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, s.wrap("vector filter fields", err)
		}
		var wider, filtered []*vecRead
		for _, r := range pending {
			out := r.visible(f, now, limit)
			switch {
			case len(out) >= limit || int64(len(r.res)) < r.count:
				// Enough, or the set has no more elements.
				all = append(all, out...)
			case r.count < widest:
				r.count = min(r.count*4, widest)
				wider = append(wider, r)
			default:
				filtered = append(filtered, r)
			}
		}
		if len(filtered) > 0 {
			out, err := s.vectorFiltered(ctx, blob, filtered, f, now.UnixNano(), limit, ef)
			if err != nil {
				return nil, err
			}
			all = append(all, out...)
		}
		pending = wider
	}
	return topScored(all, limit), nil
}

// checkQuery refuses a query vector that cannot be compared.
func checkQuery(model string, vec []float32) error {
	if model == "" || len(vec) == 0 {
		return fmt.Errorf("%w: a vector query needs a model and a vector", memory.ErrInvalid)
	}
	if !finiteVec(vec) {
		return fmt.Errorf("%w: the query vector holds a value that is not a finite number", memory.ErrInvalid)
	}
	return nil
}

// smallSet is the most elements a vector set may hold to be searched on
// the server's main thread.
const smallSet = 256

// noteSetSize records whether a vector set is small: it answered fewer
// neighbours than asked, that is, all its elements, and at most smallSet.
// The next search of a small set runs on the server's main thread
// (NOTHREAD): Redis 8.0 starts a thread for each threaded VSIM, which on
// the injector benchmark cost the server about 0.25 ms of CPU per search,
// far more than searching a few elements. A set that grows past the count
// answers a full result and goes back to a thread on the search after; a
// wrong guess costs time, never results.
func (s *Store) noteSetSize(key string, small bool) {
	if small {
		if _, ok := s.smallSets.Load(key); !ok {
			s.smallSets.Store(key, struct{}{})
		}
	} else {
		s.smallSets.Delete(key)
	}
}

// vecRead is the vector search of one scope tag.
type vecRead struct {
	tag   scopeTag
	keys  keys
	set   string // the vector set of the query's model
	count int64  // neighbours asked
	sim   *goredis.VectorScoreSliceCmd
	res   []goredis.VectorScore
	vis   *goredis.SliceCmd
}

// queueVis queues the read of the filter fields of the last search's
// elements on pipe (into r.vis) and reports whether there were any.
func (r *vecRead) queueVis(ctx context.Context, pipe goredis.Pipeliner) bool {
	if len(r.res) == 0 {
		return false
	}
	ids := make([]string, len(r.res))
	for j, v := range r.res {
		ids[j] = v.Name
	}
	r.vis = pipe.HMGet(ctx, r.keys.vis(), ids...)
	return true
}

// visible returns the first limit visible neighbours of the last search,
// with cosine scores (VSIM's score is (1 + cosine) / 2), positive only.
func (r *vecRead) visible(f memory.Filter, now time.Time, limit int) []memory.Scored {
	if r.vis == nil {
		return nil
	}
	fields := r.vis.Val()
	var out []memory.Scored
	for j, v := range r.res {
		if len(out) == limit {
			break
		}
		if s, _ := fields[j].(string); visibleFields(s, r.tag.project, f, now) {
			if cos := 2*v.Score - 1; cos > 0 {
				out = append(out, memory.Scored{ID: v.Name, Score: cos})
			}
		}
	}
	return out
}

// vectorFiltered is the fallback for tags whose widest unfiltered search
// found too few visible neighbours: VSIM with the filter expression over
// the node attributes, allowed to visit the whole set.
func (s *Store) vectorFiltered(ctx context.Context, blob goredis.Vector, reads []*vecRead, f memory.Filter, nowNano int64, limit int, ef int64) ([]memory.Scored, error) {
	pipe := s.c.Pipeline()
	cards := make([]*goredis.IntCmd, len(reads))
	for i, r := range reads {
		cards[i] = pipe.VCard(ctx, r.set)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap("vector", err)
	}
	pipe = s.c.Pipeline()
	sims := make([]*goredis.VectorScoreSliceCmd, len(reads))
	for i, r := range reads {
		sims[i] = pipe.VSimWithArgsWithScores(ctx, r.set, blob, &goredis.VSimArgs{
			Count: int64(limit), EF: max(ef, int64(limit)), Filter: vectorFilter(f, r.tag.kind, nowNano),
			FilterEF: max(int64(limit)*100, cards[i].Val())})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.vectorErr(err)
	}
	// Another project's elements come from its reach-anywhere set, whose
	// attributes a rebuild may have left stale (rebuildReach): judged by
	// their filter fields too, as the unfiltered rounds judge every
	// element.
	pipe = s.c.Pipeline()
	queued := false
	for i, r := range reads {
		r.res, r.vis = sims[i].Val(), nil
		if r.tag.kind == tagForeign {
			queued = r.queueVis(ctx, pipe) || queued
		}
	}
	if queued {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, s.wrap("vector filter fields", err)
		}
	}
	now := time.Unix(0, nowNano)
	var out []memory.Scored
	for _, r := range reads {
		if r.vis != nil {
			out = append(out, r.visible(f, now, limit)...)
			continue
		}
		for _, v := range r.res {
			if cos := 2*v.Score - 1; cos > 0 {
				out = append(out, memory.Scored{ID: v.Name, Score: cos})
			}
		}
	}
	return out, nil
}

func (s *Store) vectorErr(err error) error {
	if strings.Contains(err.Error(), "dimension") {
		return fmt.Errorf("%w: %v", memory.ErrInvalid, err)
	}
	return s.wrap("vector", err)
}

// VectorScores implements memory.VectorScorer: one VEMB RAW per id (one
// pipeline), each element's stored vector as the set keeps it (int8 codes,
// float32 or bits: the cosine of a Q8 set is that of its codes, as VSIM's),
// the cosine computed here.
func (s *Store) VectorScores(ctx context.Context, model string, vec []float32, ids []string) ([]memory.Scored, error) {
	if err := checkQuery(model, vec); err != nil || len(ids) == 0 {
		return nil, err
	}
	projects, err := s.projectsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	pipe := s.c.Pipeline()
	cmds := make([]*goredis.SliceCmd, len(ids))
	for i, id := range ids {
		if p, ok := projects[id]; ok {
			cmds[i] = pipe.VEmb(ctx, s.keys(p).vectors(model), id, true)
		}
	}
	// A node without a vector of the model (or of a project without that
	// set) answers nil.
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, s.wrap("vector scores", err)
	}
	var qn float64
	for _, x := range vec {
		qn += float64(x) * float64(x)
	}
	if qn == 0 {
		return nil, nil
	}
	qn = math.Sqrt(qn)
	out := make([]memory.Scored, 0, len(ids))
	for i, c := range cmds {
		if c == nil {
			continue
		}
		raw, err := c.Result()
		if errors.Is(err, goredis.Nil) || (err == nil && len(raw) < 2) {
			continue
		}
		if err != nil {
			return nil, s.wrap("vector scores", err)
		}
		kind, _ := raw[0].(string)
		blob, _ := raw[1].(string)
		cos, err := rawCosine(kind, blob, vec)
		if err != nil {
			return nil, fmt.Errorf("%w: vector of %s: %w", memory.ErrInvalid, ids[i], err)
		}
		out = append(out, memory.Scored{ID: ids[i], Score: cos / qn})
	}
	return out, nil
}

// rawCosine is q . x / |x| for the stored vector x of a VEMB RAW reply
// (the caller divides by |q|): kind int8 (codes), f32 (little-endian
// floats) or bin (one bit per dimension, least significant first, set for a
// positive component).
func rawCosine(kind, blob string, q []float32) (float64, error) {
	var dot, xn float64
	switch kind {
	case "int8":
		if len(blob) != len(q) {
			return 0, fmt.Errorf("%d stored dimensions, the query has %d", len(blob), len(q))
		}
		for i, x := range q {
			c := float64(int8(blob[i]))
			dot += float64(x) * c
			xn += c * c
		}
	case "f32":
		if len(blob) != 4*len(q) {
			return 0, fmt.Errorf("%d stored dimensions, the query has %d", len(blob)/4, len(q))
		}
		for i, x := range q {
			b := blob[4*i : 4*i+4]
			c := float64(math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24))
			dot += float64(x) * c
			xn += c * c
		}
	case "bin":
		// Bits come in 64-bit words: the dimension is known to a word.
		if (len(q)+63)/64*8 != len(blob) {
			return 0, fmt.Errorf("%d stored bits, the query has %d dimensions", len(blob)*8, len(q))
		}
		for i, x := range q {
			if blob[i/8]>>(i%8)&1 == 1 {
				dot += float64(x)
			} else {
				dot -= float64(x)
			}
		}
		xn = float64(len(q))
	default:
		return 0, fmt.Errorf("unknown quantization %q", kind)
	}
	if xn == 0 {
		return 0, nil
	}
	return dot / math.Sqrt(xn), nil
}
