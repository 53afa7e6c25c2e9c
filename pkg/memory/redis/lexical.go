package redis

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// lexDictFirstTerm is the ARGV index (Lua's, 1-based) of lexDictScript's
// first query term, by which its reply names a list's query term.
const lexDictFirstTerm = 4

// maxExpansions is how many dictionary terms one query term may expand to
// as a prefix (the exact term first: it sorts first).
const maxExpansions = 12

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
// Each query term (memory.LexTerm: a stem prefix and the query's words
// that have it) is expanded as a prefix over the term dictionary
// (ZRANGEBYLEX); beside a prefix that is itself in the dictionary only
// expansions held by few documents (at most the minimum per term) join.
// The words' own tokens always join, also past the first expansions. It is
// a script so that the dictionary and the document frequencies cost one
// round trip.
//
// A prefix of fewer than memory.PrefixMin runes matches only itself
// (marked with a leading '=': "in" would otherwise match "income" and
// "inch"), as in the SQLite store.
//
// KEYS: term dictionary, corpus statistics. ARGV: key prefix, max
// expansions, minimum postings per term, then per query term its prefix
// and its words separated by spaces (tokens hold none). Reply: document
// count, total length, then per list its key, document frequency and its
// kind: "0:<i>" for a word of query term i, "1:<i>" for another expansion
// of its prefix (i: the term's index in ARGV, 1-based as Lua counts, so
// the first query term is lexDictFirstTerm).
var lexDictScript = goredis.NewScript(`
local p = ARGV[1]
local maxExp = tonumber(ARGV[2])
local minPer = tonumber(ARGV[3])
local st = redis.call('HMGET', KEYS[2], 'n', 'l')
local out = {st[1] or '0', st[2] or '0'}
if (tonumber(out[1]) or 0) <= 0 then return out end
for qi = 4, #ARGV do
  local parts = {}
  for w in string.gmatch(ARGV[qi], '%S+') do parts[#parts + 1] = w end
  local q = parts[1]
  local whole = string.sub(q, 1, 1) == '='
  if whole then q = string.sub(q, 2) end
  local words = {}
  for i = 2, #parts do words[parts[i]] = true end
  local terms = redis.call('ZRANGEBYLEX', KEYS[1], '[' .. q, '[' .. q .. '\255', 'LIMIT', 0, maxExp)
  local exact = terms[1] == q
  local seen = {}
  for _, t in ipairs(terms) do
    local key = p .. 't:' .. t
    local df = redis.call('ZCARD', key)
    if df > 0 and (t == q or words[t] or (not whole and (not exact or df <= minPer))) then
      seen[t] = true
      out[#out + 1] = key
      out[#out + 1] = tostring(df)
      out[#out + 1] = (words[t] and '0' or '1') .. ':' .. tostring(qi)
    end
  end
  for i = 2, #parts do
    local w = parts[i]
    if not seen[w] then
      seen[w] = true
      local key = p .. 't:' .. w
      local df = redis.call('ZCARD', key)
      if df > 0 then
        out[#out + 1] = key
        out[#out + 1] = tostring(df)
        out[#out + 1] = '0:' .. tostring(qi)
      end
    end
  end
end
return out
`)

// Lexical is BM25 over label, body, paths and entity names (k1 1.2, b 0.75,
// the current document count and average length of the scopes read
// together: see weigh).
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
//     term; an expansion only its share). A list that fits is read whole
//     and exact; of a longer one (a very common term, whose idf is low)
//     only the best postings make candidates;
//  3. for the leading candidates, the missing contributions of the
//     truncated lists that can still matter (ZMSCORE), and the filter
//     fields of the 2*limit+20 best candidates (one HMGET of the vis hash);
//  4. only when too few of those pass: the filter fields of the rest.
//
// The steps are separate reads, not a snapshot: a node deleted in between
// has no filter fields and is left out, which is what a later read returns.
func (s *Store) Lexical(ctx context.Context, terms []string, f memory.Filter, limit int) ([]memory.Scored, error) {
	limit = memory.Limit(limit)
	var words []string
	for _, t := range terms {
		t = cutTerm(strings.ToLower(strings.TrimSpace(t)))
		if t != "" && !strings.ContainsFunc(t, unicode.IsSpace) && !slices.Contains(words, t) {
			words = append(words, t)
		}
	}
	qs := memory.LexTerms(words)
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
	k := 2*limit + 20
	for _, r := range reads {
		r.rank(k)
	}
	if err := s.completeLeaders(ctx, reads, limit); err != nil {
		return nil, err
	}
	now := s.now()
	var all []memory.Scored
	var more []*lexRead
	for _, r := range reads {
		if r.take(f, now, limit) < limit && r.read < len(r.cands) {
			more = append(more, r)
		}
	}
	if len(more) > 0 {
		if err := s.readRestVisibility(ctx, more); err != nil {
			return nil, err
		}
		for _, r := range more {
			r.take(f, now, limit)
		}
	}
	for _, r := range reads {
		all = append(all, r.out...)
	}
	return topScored(all, limit), nil
}

// planReads is step 1 of Lexical: the dictionary script over the tags,
// and each tag's posting reads planned (tags with nothing to read left
// out).
func (s *Store) planReads(ctx context.Context, tags []scopeTag, qs []memory.LexTerm, minPer int) ([]*lexRead, error) {
	args := make([]any, 0, 3+len(qs))
	for _, q := range qs {
		arg := q.Prefix
		if utf8.RuneCountInString(arg) < memory.PrefixMin {
			arg = "=" + arg
		}
		args = append(args, arg+" "+strings.Join(q.Words, " "))
	}
	dicts, err := s.evalTags(ctx, lexDictScript, len(tags), func(i int) ([]string, []any) {
		k := s.keys(tags[i].project)
		return []string{k.terms(), k.stats()}, append([]any{k.p, maxExpansions, minPer}, args...)
	})
	if err != nil {
		return nil, s.wrap("lexical", err)
	}
	reads := make([]*lexRead, 0, len(tags))
	for i, d := range dicts {
		r, err := parseLexDict(tags[i], s.keys(tags[i].project), d, qs)
		if err != nil {
			return nil, err
		}
		if r != nil {
			reads = append(reads, r)
		}
	}
	weigh(reads)
	reads = slices.DeleteFunc(reads, func(r *lexRead) bool { return len(r.lists) == 0 })
	for _, r := range reads {
		r.plan(s.lexBudget, minPer)
	}
	return reads, nil
}

// weigh sets the BM25 statistics of the reads from their scopes together:
// the document count, the average length and every document frequency are
// summed over the scopes one query reads (the project, the tenant's global
// memories, other projects' reach-anywhere ones), so that a score means
// the same in each. Per scope, a memory alone in its scope would get the
// idf of a term that every document holds, and a block's relative floor
// would drop it beside the project's own matches.
//
// One idf per query term, from the summed document frequency of the term
// and its expansions (at most the document count), as the SQLite store
// counts a prefix term: scored apart, each rare expansion ("mythology" of
// "my") would weigh more than the question's content words. A word's own
// token counts once more, memory.ExactWeight x its own idf. Both are
// multiplied by the query term's weight (memory.LexTerm: a stop word
// counts memory.StopWordWeight).
func weigh(reads []*lexRead) {
	var n, total float64
	groupDF := map[string]int64{}
	wordDF := map[string]int64{}
	for _, r := range reads {
		n += r.n
		total += r.total
		for _, l := range r.lists {
			groupDF[l.group] += l.df
			if !l.exp {
				wordDF[l.term()] += l.df
			}
		}
	}
	avgdl := total / n
	if !(avgdl > 0) {
		avgdl = 1
	}
	idf := func(df int64) float64 {
		d := min(float64(df), n)
		return math.Log(1 + (n-d+0.5)/(d+0.5))
	}
	for _, r := range reads {
		r.c1, r.c2 = bm25K1*(1-bm25B), bm25K1*bm25B/avgdl
		for _, l := range r.lists {
			w := idf(groupDF[l.group])
			if !l.exp {
				w += memory.ExactWeight * idf(wordDF[l.term()])
			}
			l.w = w * l.tw * (bm25K1 + 1)
		}
	}
}

// lexRead is the lexical query of one scope tag on its way through the
// steps of Lexical.
type lexRead struct {
	tag      scopeTag
	keys     keys
	n, total float64 // the scope's document count and summed length
	c1, c2   float64 // BM25 length normalisation: k1*(1-b), k1*b/avgdl (see weigh)
	lists    []*postingList

	cands  []memory.Scored // every document a read posting names, ranked by rank
	ranked int             // cands[:ranked] are the leading ones, whose filter fields step 3 reads
	read   int             // cands[:read] have their filter fields in vis
	vis    map[string]any  // filter fields by document (nil: no entry)
	next   int             // the next candidate take judges
	out    []memory.Scored
}

// postingList is one term's postings in one project.
type postingList struct {
	key   string
	df    int64
	exp   bool    // an expansion of a query term, not the term itself
	group string  // the query term it belongs to (its index)
	tw    float64 // the query term's weight (memory.LexTerm.Weight)
	w     float64 // (idf of the group, + ExactWeight x its own for a word) * tw * (k1+1) (see weigh)
	read  int64   // postings to read, best first

	postings *goredis.ZSliceCmd
	// Where reading stopped in a truncated list (equal scores come in
	// reverse member order) and the contribution of that last posting: no
	// unread posting contributes more.
	truncated  bool
	stop       float64
	stopMember string
	last       float64
	missing    *goredis.FloatSliceCmd // the leading candidates' scores in this list
}

// parseLexDict reads the reply of lexDictScript to the query terms qs
// (nil: an empty scope).
func parseLexDict(tag scopeTag, k keys, d []string, qs []memory.LexTerm) (*lexRead, error) {
	if len(d) < 2 || (len(d)-2)%3 != 0 {
		return nil, fmt.Errorf("redis lexical: dictionary reply of %d values", len(d))
	}
	n, err1 := strconv.ParseFloat(d[0], 64)
	total, err2 := strconv.ParseFloat(d[1], 64)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("redis lexical: corpus statistics %q, %q", d[0], d[1])
	}
	if n <= 0 {
		return nil, nil
	}
	// A scope without a match still counts in the statistics (weigh).
	r := &lexRead{tag: tag, keys: k, n: n, total: total}
	for i := 2; i+2 < len(d); i += 3 {
		df, err := strconv.ParseInt(d[i+1], 10, 64)
		kind, group, ok := strings.Cut(d[i+2], ":")
		if err != nil || df <= 0 || !ok || (kind != "0" && kind != "1") {
			return nil, fmt.Errorf("redis lexical: document frequency %q or kind %q of %s", d[i+1], d[i+2], d[i])
		}
		qi, err := strconv.Atoi(group)
		if err != nil || qi < lexDictFirstTerm || qi-lexDictFirstTerm >= len(qs) {
			return nil, fmt.Errorf("redis lexical: query term %q of %s", group, d[i])
		}
		r.lists = append(r.lists, &postingList{key: d[i], df: df, exp: kind == "1", group: group,
			tw: qs[qi-lexDictFirstTerm].Weight})
	}
	return r, nil
}

// term is the dictionary term of the list (its key ends with "t:<term>";
// a term holds no colon).
func (l *postingList) term() string { return l.key[strings.LastIndexByte(l.key, ':')+1:] }

// plan shares the budget out. Lists are taken shortest first, and each
// may read its share of what is left, weighted by the cube of its term
// weight (w, which grows with idf): rare terms are read whole, and of the
// common ones the rarer get the most. A posting of a high-weight list can
// lift a document far above one of a common term, whose postings are
// nearly interchangeable (a very common term's are mostly ties, read in
// no useful order). A query term reads at least minPer; many short
// expansion lists cannot exceed the budget. On natural text (see
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
	for i, l := range r.lists {
		m := left
		if i < len(r.lists)-1 {
			m = int64(float64(left) * (weights[i] - weights[i+1]) / weights[i])
		}
		if !l.exp {
			m = max(int64(minPer), m)
		}
		l.read = max(0, min(m, l.df))
		l.truncated = l.read > 0 && l.read < l.df
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

// contribution is a posting's BM25 term: w * tf / (tf + k1*(1-b+b*len/avgdl)).
func (r *lexRead) contribution(w, packed float64) float64 {
	rest := int64(packed) % postingShift
	tf := float64(rest >> 16)
	return w * tf / (tf + r.c1 + r.c2*float64(rest&0xffff))
}

// rank scores the read postings and orders the candidates, the best k
// first (ties: the smaller id).
func (r *lexRead) rank(k int) {
	n := 0
	for _, l := range r.lists {
		if l.postings != nil {
			n += len(l.postings.Val())
		}
	}
	r.cands = make([]memory.Scored, 0, n)
	index := make(map[string]int, n) // document -> position in cands
	for _, l := range r.lists {
		if l.postings == nil {
			continue
		}
		ps := l.postings.Val()
		for _, p := range ps {
			id, _ := p.Member.(string)
			v := r.contribution(l.w, p.Score)
			if i, ok := index[id]; ok {
				r.cands[i].Score += v
			} else {
				index[id] = len(r.cands)
				r.cands = append(r.cands, memory.Scored{ID: id, Score: v})
			}
		}
		if l.truncated && len(ps) > 0 {
			last := ps[len(ps)-1]
			l.stop = last.Score
			l.stopMember, _ = last.Member.(string)
			l.last = r.contribution(l.w, last.Score)
		}
	}
	// Only the leaders need their order now; the rest is sorted when
	// readRestVisibility reaches it.
	r.ranked = min(k, len(r.cands))
	sortBest(r.cands, r.ranked)
}

// completeLeaders is step 3. The leading limit+10 candidates get the
// contributions of truncated lists they hold beyond where reading stopped,
// from the lists whose unread postings can still matter (more than 5% of
// the limit-th score; on the benchmark corpus 1% ranks the same); the
// 2*limit+20 best get their filter fields.
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
					c.Score += r.contribution(l.w, sc)
				}
			}
		}
		r.keepVisibility(vis[i].Val())
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
