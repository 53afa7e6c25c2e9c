package redis

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// maxExpansions is how many longer dictionary terms one query term may
// expand to as a prefix (the first in dictionary order), besides the exact
// term: the SQLite store's prefixMax.
const maxExpansions = 32

// lexicalBudget is about how many postings one lexical query reads in a
// project, spread over its terms (see lexRead.plan), at least
// lexicalMinPerTerm (and limit) per query term; prefix expansions get only
// their share. Reading postings is most of the channel's server time. On
// natural text (TestLexicalQuality: 40,000 paragraphs, 200 queries) 800
// reads about 1,100 postings per query (the per-term minimum adds to it)
// and keeps 98% of exact BM25's top-10 score mass, 85% of its top 10 and
// 78% of its top 24; on the injector benchmark's corpus it reads 800.
const (
	lexicalBudget     = 800
	lexicalMinPerTerm = 100
)

// BM25 parameters, and the packing of a posting's score (see
// reindexLexScript): impact << 29 | tf << 16 | document length.
const (
	bm25K1       = 1.2
	bm25B        = 0.75
	postingShift = 1 << 29
)

// lexDictScript finds the posting lists of one project's lexical query.
// Each query term is expanded as a prefix over the term dictionary
// (ZRANGEBYLEX): the term itself and up to maxExpansions longer terms,
// every one of them, as in the SQLite store (TestLexicalParityDev; when
// expansions beside an exact term joined only with short lists, 4 of the
// first 30 development-set rankings differed).
// How much of each list is read is the budget's business (see plan). It
// is a script so that the dictionary and the document frequencies cost
// one round trip.
//
// A query term of fewer than prefixMin runes matches only itself (marked
// with a leading '=': "in" would otherwise match "income" and "inch"), as
// in the SQLite store.
//
// KEYS: term dictionary, corpus statistics. ARGV: key prefix, max
// expansions, query terms... Reply: document count, total length, then
// per list its key, document frequency and its kind: "0:<i>" for query
// term i itself, "1:<i>" for an expansion of it.
var lexDictScript = goredis.NewScript(`
local p = ARGV[1]
local maxExp = tonumber(ARGV[2])
local st = redis.call('HMGET', KEYS[2], 'n', 'l')
local out = {st[1] or '0', st[2] or '0'}
if (tonumber(out[1]) or 0) <= 0 then return out end
for qi = 3, #ARGV do
  local q = ARGV[qi]
  local whole = string.sub(q, 1, 1) == '='
  if whole then q = string.sub(q, 2) end
  local terms = {q}
  if not whole then
    terms = redis.call('ZRANGEBYLEX', KEYS[1], '[' .. q, '[' .. q .. '\255', 'LIMIT', 0, maxExp + 1)
  end
  local longer = 0
  for _, t in ipairs(terms) do
    if t ~= q then longer = longer + 1 end
    if longer <= maxExp then
      local key = p .. 't:' .. t
      local df = redis.call('ZCARD', key)
      if df > 0 then
        out[#out + 1] = key
        out[#out + 1] = tostring(df)
        out[#out + 1] = (t == q and '0' or '1') .. ':' .. tostring(qi)
      end
    end
  end
end
return out
`)

// prefixMin is the shortest query term matched as a prefix (in runes).
const prefixMin = 3

// Lexical is BM25 over label, body, paths and entity names (k1 1.2, b 0.75,
// the current document count and average length), per project read, scored
// as the SQLite store scores it: a query term and its prefix expansions
// are one term (a group), whose frequency in a document is the sum over
// the group's lists, saturated once (tf/(tf+k1*(1-b+b*len/avgdl))), and
// whose idf counts the documents holding any of them (see groupWeights);
// a common query term (more than a quarter of the documents) is left out
// once the rarer ones matched 2 x limit documents (see skipCommon), unless
// the filter then leaves fewer than limit.
//
// The server does only what needs the data: the dictionary (lexDictScript),
// the posting reads and, for the leading candidates, the filter fields and
// the scores of the postings that were not read. Scoring, ranking and the
// filter (memory.Visible itself) run here, where they do not hold the
// server's one thread: in Lua they cost about 2 ms of server time per query
// at 100,000 nodes. Every step is one pipeline over the scope tags (a
// cluster client splits it by node):
//
//  1. the dictionary script;
//  2. the posting lists, read best impact first (postings sort by impact,
//     see reindexLexScript), shortest list first, each up to its share of
//     what is left of the budget (at least lexicalMinPerTerm for a query
//     term; an expansion only its share, but at least its best posting).
//     A list that fits is read whole and exact; of a longer one (a very
//     common term, whose idf is low) only the best postings make
//     candidates, scored from the tf they have read;
//  3. for the leading candidates, the term frequencies they hold in the
//     truncated lists that can still matter (ZMSCORE), added to their
//     groups' sums and scored again, and the filter fields of the
//     2*limit+20 best candidates (one HMGET of the vis hash);
//  4. only when too few of those pass: the filter fields of the rest.
//
// Where lists are truncated the score is approximate as before: a
// candidate past the leaders lacks the unread part of its tf, and a
// group's document count is an upper bound (documents read plus postings
// not read, less the double counts the leaders' lookups reveal).
//
// The steps are separate reads, not a snapshot: a node deleted in between
// has no filter fields and is left out, which is what a later read returns.
func (s *Store) Lexical(ctx context.Context, terms []string, f memory.Filter, limit int) ([]memory.Scored, error) {
	limit = memory.Limit(limit)
	var qs []string
	for _, t := range terms {
		t = cutTerm(strings.ToLower(strings.TrimSpace(t)))
		if t != "" && !slices.Contains(qs, t) {
			qs = append(qs, t)
		}
	}
	if len(qs) == 0 {
		return nil, nil
	}
	tags, err := s.scopeTags(ctx, f)
	if err != nil {
		return nil, err
	}
	if noSubkinds(f) {
		return nil, nil
	}
	reads, err := s.planReads(ctx, tags, qs, max(s.lexMinPer, limit))
	if err != nil {
		return nil, err
	}
	if len(reads) == 0 {
		return nil, nil
	}
	if err := s.readPostings(ctx, reads); err != nil {
		return nil, err
	}
	if err := s.judge(ctx, reads, f, limit, limit); err != nil {
		return nil, err
	}
	// A read that left common terms out (skipCommon) and found fewer than
	// limit visible documents is ranked again with every term: the filter
	// rejected documents the rarer terms matched, and documents only the
	// common terms match may pass. (The SQLite store answers with fewer
	// there.)
	var again []*lexRead
	for _, r := range reads {
		if len(r.out) < limit && slices.Contains(r.skip, true) {
			r.reset()
			again = append(again, r)
		}
	}
	if len(again) > 0 {
		if err := s.judge(ctx, again, f, limit, 0); err != nil {
			return nil, err
		}
	}
	var all []memory.Scored
	for _, r := range reads {
		all = append(all, r.out...)
	}
	return topScored(all, limit), nil
}

// judge is steps 3 and 4 of Lexical for reads whose postings are read:
// rank the candidates (want: see skipCommon), complete the leaders, and
// take the visible ones, reading more filter fields when too few pass.
func (s *Store) judge(ctx context.Context, reads []*lexRead, f memory.Filter, limit, want int) error {
	k := 2*limit + 20
	for _, r := range reads {
		r.rank(k, want)
	}
	if err := s.completeLeaders(ctx, reads, limit); err != nil {
		return err
	}
	now := s.now()
	var more []*lexRead
	for _, r := range reads {
		if r.take(f, now, limit) < limit && r.read < len(r.cands) {
			more = append(more, r)
		}
	}
	if len(more) > 0 {
		if err := s.readRestVisibility(ctx, more); err != nil {
			return err
		}
		for _, r := range more {
			r.take(f, now, limit)
		}
	}
	return nil
}

// reset forgets what judge made of r's postings (not the postings).
func (r *lexRead) reset() {
	r.cands, r.ranked, r.read, r.next, r.vis, r.out = nil, 0, 0, 0, nil, nil
	for _, l := range r.lists {
		l.missing = nil
	}
}

// planReads is step 1 of Lexical: the dictionary script over the tags,
// and each tag's posting reads planned (tags with nothing to read left
// out).
func (s *Store) planReads(ctx context.Context, tags []scopeTag, qs []string, minPer int) ([]*lexRead, error) {
	dicts, err := s.evalTags(ctx, lexDictScript, len(tags), func(i int) ([]string, []any) {
		k := s.keys(tags[i].project)
		args := []any{k.p, maxExpansions}
		for _, q := range qs {
			if utf8.RuneCountInString(q) < prefixMin {
				q = "=" + q
			}
			args = append(args, q)
		}
		return []string{k.terms(), k.stats()}, args
	})
	if err != nil {
		return nil, s.wrap("lexical", err)
	}
	reads := make([]*lexRead, 0, len(tags))
	for i, d := range dicts {
		r, err := parseLexDict(tags[i], s.keys(tags[i].project), d)
		if err != nil {
			return nil, err
		}
		if r != nil {
			r.plan(s.lexBudget, minPer)
			reads = append(reads, r)
		}
	}
	return reads, nil
}

// lexRead is the lexical query of one scope tag on its way through the
// steps of Lexical.
type lexRead struct {
	tag    scopeTag
	keys   keys
	c1, c2 float64 // BM25 length normalisation: k1*(1-b), k1*b/avgdl
	n      float64 // document count
	lists  []*postingList
	gw     []float64 // per query-term group: idf * (k1+1) (see parseLexDict, groupWeights)
	gdf    []int64   // per group: the documents holding any of its terms, or a bound (see groupWeights)
	skip   []bool    // per group: a common term left out (see skipCommon)

	// What the read postings say of each candidate document: its length
	// and, per group, its term frequency summed over the group's lists
	// (tf[doc*len(gw)+group]); doc is the document's position in docIDs
	// (index maps back), not in cands, which is sorted.
	index map[string]int
	dl    []float64
	tf    []float64

	cands  []memory.Scored // every document a read posting names, ranked by rank
	ranked int             // cands[:ranked] are the leading ones, whose filter fields step 3 reads
	read   int             // cands[:read] have their filter fields in vis
	vis    map[string]any  // filter fields by document (nil: no entry)
	next   int             // the next candidate take judges
	out    []memory.Scored
}

// postingList is one term's postings in one project.
type postingList struct {
	key  string
	df   int64
	exp  bool    // an expansion of a query term, not the term itself
	g    int     // the query-term group it belongs to (index of lexRead.gw)
	w    float64 // the group's weight, gw[g]
	read int64   // postings to read, best first

	postings *goredis.ZSliceCmd
	// Where reading stopped in a truncated list (equal scores come in
	// reverse member order) and the contribution of that last posting
	// scored alone: no unread posting adds more to a document's score (see
	// completeLeaders).
	truncated  bool
	stop       float64
	stopMember string
	last       float64
	missing    *goredis.FloatSliceCmd // the leading candidates' scores in this list
}

// parseLexDict reads the reply of lexDictScript (nil: nothing to read).
func parseLexDict(tag scopeTag, k keys, d []string) (*lexRead, error) {
	if len(d) < 2 || (len(d)-2)%3 != 0 {
		return nil, fmt.Errorf("redis lexical: dictionary reply of %d values", len(d))
	}
	n, err1 := strconv.ParseFloat(d[0], 64)
	total, err2 := strconv.ParseFloat(d[1], 64)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("redis lexical: corpus statistics %q, %q", d[0], d[1])
	}
	if n <= 0 || len(d) == 2 {
		return nil, nil
	}
	avgdl := total / n
	if avgdl <= 0 {
		avgdl = 1
	}
	r := &lexRead{tag: tag, keys: k, c1: bm25K1 * (1 - bm25B), c2: bm25K1 * bm25B / avgdl, n: n}
	// One idf per query term, from the summed document frequency of the
	// term and its expansions (at most the document count), as the SQLite
	// store counts a prefix term: scored apart, each rare expansion ("mythology"
	// of "my") would weigh more than the question's content words.
	groups := map[string]int{} // the query term's index in ARGV -> group
	var groupDF []int64
	for i := 2; i+2 < len(d); i += 3 {
		df, err := strconv.ParseInt(d[i+1], 10, 64)
		kind, q, ok := strings.Cut(d[i+2], ":")
		if err != nil || df <= 0 || !ok || (kind != "0" && kind != "1") {
			return nil, fmt.Errorf("redis lexical: document frequency %q or kind %q of %s", d[i+1], d[i+2], d[i])
		}
		g, seen := groups[q]
		if !seen {
			g = len(groupDF)
			groups[q] = g
			groupDF = append(groupDF, 0)
		}
		r.lists = append(r.lists, &postingList{key: d[i], df: df, exp: kind == "1", g: g})
		groupDF[g] += df
	}
	r.gw = make([]float64, len(groupDF))
	for g, gdf := range groupDF {
		df := min(float64(gdf), n)
		r.gw[g] = math.Log(1+(n-df+0.5)/(df+0.5)) * (bm25K1 + 1)
	}
	for _, l := range r.lists {
		l.w = r.gw[l.g]
	}
	return r, nil
}

// plan shares the budget out. Lists are taken shortest first, and each
// may read its share of what is left, weighted by the cube of its term
// weight (w, which grows with idf): rare terms are read whole, and of the
// common ones the rarer get the most. A posting of a high-weight list can
// lift a document far above one of a common term, whose postings are
// nearly interchangeable (a very common term's are mostly ties, read in
// no useful order). A query term reads at least minPer; many short
// expansion lists cannot exceed the budget by more than one posting each
// (every list reads at least one). On natural text (see
// TestLexicalQuality) it keeps exact BM25's top 10 and top 24 as well as
// an even split of a budget half again as large did, reading 10% fewer
// postings.
func (r *lexRead) plan(budget, minPer int) {
	slices.SortStableFunc(r.lists, func(a, b *postingList) int { return int(a.df - b.df) })
	weights := make([]float64, len(r.lists)+1) // weights[i]: the lists from i on
	for i := len(r.lists) - 1; i >= 0; i-- {
		w := max(r.lists[i].w, 1e-3) // an idf is positive; a stale count could make it not
		weights[i] = weights[i+1] + w*w*w
	}
	left := int64(budget)
	var all int64
	for _, l := range r.lists {
		all += l.df
	}
	if all <= left {
		// Everything fits: every list is read whole and scored exactly (the
		// shares below would give an expansion of a low-weight term a
		// posting or two however large the budget).
		for _, l := range r.lists {
			l.read, l.truncated = l.df, false
		}
		return
	}
	for i, l := range r.lists {
		m := left
		if i < len(r.lists)-1 {
			m = int64(float64(left) * (weights[i] - weights[i+1]) / weights[i])
		}
		if !l.exp {
			m = max(int64(minPer), m)
		}
		// Every list reads at least its best posting: what no read posting
		// exceeds, the bound by which completeLeaders judges whether the
		// rest can matter (an expansion left unread would be lost to its
		// group's summed tf).
		l.read = max(1, min(m, l.df))
		l.truncated = l.read < l.df
		left = max(0, left-l.read)
	}
}

// readPostings is step 2: every planned list of every tag, in one pipeline.
func (s *Store) readPostings(ctx context.Context, reads []*lexRead) error {
	pipe := s.c.Pipeline()
	for _, r := range reads {
		for _, l := range r.lists {
			if l.read > 0 {
				l.postings = pipe.ZRangeArgsWithScores(ctx, goredis.ZRangeArgs{Key: l.key, Start: 0, Stop: l.read - 1, Rev: true})
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("lexical postings", err)
	}
	return nil
}

// unpack reads a posting's term frequency and document length from its
// packed score (see reindexLexScript).
func unpack(packed float64) (tf, dl float64) {
	rest := int64(packed) % postingShift
	return float64(rest >> 16), float64(rest & 0xffff)
}

// saturated is BM25's term weight of a term frequency summed over a
// query-term group: w * tf / (tf + k1*(1-b+b*len/avgdl)).
func (r *lexRead) saturated(w, tf, dl float64) float64 {
	if tf <= 0 {
		return 0
	}
	return w * tf / (tf + r.c1 + r.c2*dl)
}

// score is a candidate document's BM25 from what is known of its term
// frequencies: the sum over the query-term groups of the saturation of the
// group's summed tf, as the SQLite store scores a prefix term.
func (r *lexRead) score(doc int) float64 {
	g := len(r.gw)
	v := 0.0
	for i, tf := range r.tf[doc*g : (doc+1)*g] {
		v += r.saturated(r.gw[i], tf, r.dl[doc])
	}
	return v
}

// rank sums the read postings' term frequencies per document and group,
// scores the candidates and orders them, the best k first (ties: the
// smaller id).
func (r *lexRead) rank(k, want int) {
	n := 0
	for _, l := range r.lists {
		if l.postings != nil {
			n += len(l.postings.Val())
		}
	}
	g := len(r.gw)
	r.index = make(map[string]int, n)
	r.dl = make([]float64, 0, n)
	r.tf = make([]float64, 0, n*g)
	ids := make([]string, 0, n)
	for _, l := range r.lists {
		if l.postings == nil {
			continue
		}
		ps := l.postings.Val()
		for _, p := range ps {
			id, _ := p.Member.(string)
			tf, dl := unpack(p.Score)
			doc, ok := r.index[id]
			if !ok {
				doc = len(ids)
				r.index[id] = doc
				ids = append(ids, id)
				r.dl = append(r.dl, dl)
				for range g {
					r.tf = append(r.tf, 0)
				}
			}
			r.tf[doc*g+l.g] += tf
		}
	}
	r.skipCommon(want)
	r.groupWeights()
	for _, l := range r.lists {
		if ps := l.postings; ps != nil && l.truncated && len(ps.Val()) > 0 {
			last := ps.Val()[len(ps.Val())-1]
			l.stop = last.Score
			l.stopMember, _ = last.Member.(string)
			tf, dl := unpack(last.Score)
			l.last = r.saturated(l.w, tf, dl)
		}
	}
	r.cands = make([]memory.Scored, 0, len(ids))
	for doc, id := range ids {
		if v := r.score(doc); v > 0 { // 0: only terms skipCommon left out
			r.cands = append(r.cands, memory.Scored{ID: id, Score: v})
		}
	}
	// Only the leaders need their order now; the rest is sorted when
	// readRestVisibility reaches it.
	r.ranked = min(k, len(r.cands))
	sortBest(r.cands, r.ranked)
}

// groupWeights sets each query-term group's weight from the read
// postings. The SQLite store's idf of a prefix term counts the documents
// holding any of its expansions; parseLexDict's sum of the lists' document
// frequencies counts a document holding two expansions twice. When every
// list of a group is read whole the documents are all known and counted;
// otherwise the count is those read plus every posting not read (at most
// the sum): an upper bound again, tighter than the sum, which
// completeLeaders tightens further.
func (r *lexRead) groupWeights() {
	g := len(r.gw)
	r.gdf = make([]int64, g)
	sum := make([]int64, g) // the lists' document frequencies
	for _, l := range r.lists {
		n := int64(0)
		if l.postings != nil {
			n = int64(len(l.postings.Val()))
		}
		r.gdf[l.g] += max(0, l.df-n) // postings not read
		sum[l.g] += l.df
	}
	for doc := range r.dl {
		for i, tf := range r.tf[doc*g : (doc+1)*g] {
			if tf > 0 {
				r.gdf[i]++ // a document among the read postings
			}
		}
	}
	for i := range r.gdf {
		r.gdf[i] = min(r.gdf[i], sum[i])
	}
	r.setWeights()
}

// commonShare: a query term held by more than this share of the documents
// (its lists' document frequencies summed) is "common", as in the SQLite
// store (its commonShare): when the rarer query terms already matched at
// least 2 x want documents, the common terms are not scored at all (their
// idf is below ln 4, against about 7-11 for a rare term).
const commonShare = 0.25

// skipCommon leaves out the common query-term groups the SQLite store
// leaves out: taking the groups rarest first (by summed document
// frequency; ties in query order), every common one once the groups
// before it have matched 2 x want documents. It counts the documents among
// the read postings, exact when those groups' lists are read whole (a
// truncated list's unread documents are not counted: fewer groups are
// left out, never more).
func (r *lexRead) skipCommon(want int) {
	g := len(r.gw)
	r.skip = make([]bool, g)
	if want <= 0 {
		return
	}
	sum := make([]int64, g)
	for _, l := range r.lists {
		sum[l.g] += l.df
	}
	order := make([]int, g)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(sum[a], sum[b]) })
	seen := make([]bool, len(r.dl))
	touched := 0
	for _, q := range order {
		if float64(sum[q]) > commonShare*r.n && touched >= 2*want {
			r.skip[q] = true
			continue
		}
		for doc := range r.dl {
			if r.tf[doc*g+q] > 0 && !seen[doc] {
				seen[doc] = true
				touched++
			}
		}
	}
}

// setWeights sets the groups' weights, idf * (k1+1), from their document
// counts (gdf; none: a stale count, the planned weight stays).
func (r *lexRead) setWeights() {
	for i, gdf := range r.gdf {
		if r.skip[i] {
			r.gw[i] = 0
			continue
		}
		if gdf <= 0 {
			continue
		}
		df := min(float64(gdf), r.n)
		r.gw[i] = math.Log(1+(r.n-df+0.5)/(df+0.5)) * (bm25K1 + 1)
	}
	for _, l := range r.lists {
		l.w = r.gw[l.g]
	}
}

// completeLeaders is step 3. The leading limit+10 candidates get the term
// frequencies of truncated lists they hold beyond where reading stopped,
// from the lists whose unread postings can still matter, and are scored
// again; the 2*limit+20 best get their filter fields.
//
// A list can still matter when the contribution of its last read posting
// scored alone (l.last, with a margin of 1.25 for postings ordered by an
// older average length) is more than 5% of the limit-th score (on the
// benchmark corpus 1% ranks the same). That stays a bound under the
// summed-tf scoring: the saturation x/(x+c) is concave and 0 at 0, so
// adding a posting's tf to the tf a document already has in its group
// raises the group's term by at most what the posting scores alone, and
// several lists' postings by at most the sum of their bounds.
func (s *Store) completeLeaders(ctx context.Context, reads []*lexRead, limit int) error {
	pipe := s.c.Pipeline()
	vis := make([]*goredis.SliceCmd, len(reads))
	for i, r := range reads {
		if r.ranked == 0 {
			continue
		}
		kth := r.cands[min(r.ranked, limit)-1].Score
		lead := r.ids(0, min(r.ranked, limit+10))
		for _, l := range r.lists {
			if l.truncated && l.last*1.25 >= 0.05*kth {
				l.missing = pipe.ZMScore(ctx, l.key, lead...)
			}
		}
		vis[i] = pipe.HMGet(ctx, r.keys.vis(), r.ids(0, r.ranked)...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("lexical leaders", err)
	}
	for i, r := range reads {
		if vis[i] == nil {
			continue
		}
		g := len(r.gw)
		changed, counted := false, false
		for _, l := range r.lists {
			if l.missing == nil {
				continue
			}
			// ZMSCORE answers 0 for a member the list lacks (go-redis reads
			// nil as 0); a posting's packed score is at least 1<<16.
			for j, sc := range l.missing.Val() {
				if sc <= 0 {
					continue
				}
				if c := &r.cands[j]; sc < l.stop || (sc == l.stop && c.ID < l.stopMember) {
					tf, _ := unpack(sc)
					at := r.index[c.ID]*g + l.g
					if r.tf[at] > 0 {
						// groupWeights counted this unread posting and the
						// document's other one: it is one document.
						r.gdf[l.g]--
						counted = true
					}
					r.tf[at] += tf
					changed = true
				}
			}
		}
		// Scores change only now; the candidates whose filter fields were
		// read stay the leaders (the rest is sorted in step 4).
		r.keepVisibility(vis[i].Val())
		switch {
		case counted:
			r.setWeights()
			for j := range r.cands {
				c := &r.cands[j]
				c.Score = r.score(r.index[c.ID])
			}
		case changed:
			for j := range min(r.ranked, limit+10) {
				c := &r.cands[j]
				c.Score = r.score(r.index[c.ID])
			}
		}
		sortScored(r.cands[:r.ranked])
	}
	return nil
}

// readRestVisibility is step 4: the filter fields of every candidate past
// the leading ones, for the reads that found too few visible leaders.
func (s *Store) readRestVisibility(ctx context.Context, reads []*lexRead) error {
	pipe := s.c.Pipeline()
	cmds := make([]*goredis.SliceCmd, len(reads))
	for i, r := range reads {
		sortScored(r.cands[r.read:]) // past the leaders, still in no order (see rank)
		cmds[i] = pipe.HMGet(ctx, r.keys.vis(), r.ids(r.read, len(r.cands))...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("lexical filter fields", err)
	}
	for i, r := range reads {
		r.keepVisibility(cmds[i].Val())
	}
	return nil
}

func (r *lexRead) ids(from, to int) []string {
	out := make([]string, 0, to-from)
	for _, c := range r.cands[from:to] {
		out = append(out, c.ID)
	}
	return out
}

// keepVisibility records the filter fields read for the candidates from
// r.read on, in candidate order.
func (r *lexRead) keepVisibility(fields []any) {
	if r.vis == nil {
		r.vis = make(map[string]any, len(fields))
	}
	for j, v := range fields {
		r.vis[r.cands[r.read+j].ID] = v
	}
	r.read += len(fields)
}

// take judges the candidates whose filter fields are read, in rank order,
// until limit are visible, and reports how many are.
func (r *lexRead) take(f memory.Filter, now time.Time, limit int) int {
	for ; r.next < r.read && len(r.out) < limit; r.next++ {
		c := r.cands[r.next]
		if v, _ := r.vis[c.ID].(string); visibleFields(v, r.tag.project, f, now) {
			r.out = append(r.out, c)
		}
	}
	return len(r.out)
}
