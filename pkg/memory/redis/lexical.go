package redis

import (
	"context"
	"errors"
	"fmt"
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
const lexDictFirstTerm = 3

// maxExpansions is how many longer dictionary terms one query term may
// expand to as a prefix (the first in dictionary order), besides the
// prefix itself and the query's words: the SQLite store's prefixMax.
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
// Each query term (memory.LexTerm: a stem prefix and the query's words
// that have it) is expanded as a prefix over the term dictionary
// (ZRANGEBYLEX): the prefix itself and up to maxExpansions longer terms,
// as in the SQLite store (how much of each list is read is the budget's
// business, see plan). The words' own tokens always join, also past the
// first expansions. It is a script so that the dictionary and the
// document frequencies cost one round trip.
//
// A prefix of fewer than memory.PrefixMin runes matches only itself
// (marked with a leading '=': "in" would otherwise match "income" and
// "inch"), as in the SQLite store. A term that cannot be kept costs no
// key and no ZCARD: a short prefix's range (a stop word's: "to") is
// mostly such terms, and building their keys was half the script's time.
//
// KEYS: term dictionary, corpus statistics. ARGV: key prefix, max
// expansions, then per query term its prefix
// and its words separated by spaces (tokens hold none). Reply: document
// count, total length, then per list its key, document frequency and its
// kind: "0:<i>" for a word of query term i, "1:<i>" for another expansion
// of its prefix (i: the term's index in ARGV, 1-based as Lua counts, so
// the first query term is lexDictFirstTerm).
var lexDictScript = goredis.NewScript(`
local p = ARGV[1]
local maxExp = tonumber(ARGV[2])
local st = redis.call('HMGET', KEYS[2], 'n', 'l')
local out = {st[1] or '0', st[2] or '0'}
if (tonumber(out[1]) or 0) <= 0 then return out end
for qi = 3, #ARGV do
  local parts = {}
  for w in string.gmatch(ARGV[qi], '%S+') do parts[#parts + 1] = w end
  local q = parts[1]
  local whole = string.sub(q, 1, 1) == '='
  if whole then q = string.sub(q, 2) end
  local words = {}
  for i = 2, #parts do words[parts[i]] = true end
  local terms = redis.call('ZRANGEBYLEX', KEYS[1], '[' .. q, '[' .. q .. '\255', 'LIMIT', 0, maxExp + 1)
  local seen = {}
  local longer = 0
  for _, t in ipairs(terms) do
    if t ~= q then longer = longer + 1 end
    if t == q or words[t] or (not whole and longer <= maxExp) then
      local key = p .. 't:' .. t
      local df = redis.call('ZCARD', key)
      if df > 0 then
        seen[t] = true
        out[#out + 1] = key
        out[#out + 1] = tostring(df)
        out[#out + 1] = (words[t] and '0' or '1') .. ':' .. tostring(qi)
      end
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
// together: see weigh), scored as the SQLite store scores it (see score).
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
//     fields of those limit+10 (one HMGET of the vis hash: a field of a
//     100,000-entry hash costs the server about 1.5 us; within a Retrieve
//     at FormatNodeCopies their heads instead, see fieldsFromHeads);
//  4. only when too few of those pass: the filter fields of the next
//     2*limit+20, then of the rest;
//     when that still leaves fewer than limit and common terms were left
//     out (see score), steps 3 and 4 again with every term scored.
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
	stats, err := s.statsTags(ctx, f, tags)
	if err != nil {
		return nil, err
	}
	reads, err := s.planReads(ctx, append(tags, stats...), qs, max(s.lexMinPer, limit))
	if err != nil {
		return nil, err
	}
	if len(reads) == 0 {
		return nil, nil
	}
	if err := s.readPostings(ctx, reads); err != nil {
		return nil, err
	}
	all, left, err := s.judge(ctx, reads, qs, f, limit, limit)
	if err != nil {
		return nil, err
	}
	if left && len(all) < limit {
		// The filter rejected documents the rarer terms matched, and
		// documents only the common terms match may pass: every term
		// scored (the SQLite store does the same).
		if all, _, err = s.judge(ctx, reads, qs, f, limit, 0); err != nil {
			return nil, err
		}
	}
	return topScored(all, limit), nil
}

// judge is steps 3 and 4 of Lexical for reads whose postings are read:
// score and rank the candidates (want: see score), complete the leaders,
// and take the visible ones, reading more filter fields when too few
// pass. left reports whether common terms were left out.
func (s *Store) judge(ctx context.Context, reads []*lexRead, qs []memory.LexTerm, f memory.Filter, limit, want int) (all []memory.Scored, left bool, err error) {
	for _, r := range reads {
		r.ranked, r.read, r.next, r.vis, r.out = 0, 0, 0, nil, nil
	}
	left = score(reads, qs, want, limit+10)
	if err := s.completeLeaders(ctx, reads, limit); err != nil {
		return nil, left, err
	}
	now := s.now()
	var more []*lexRead
	for _, r := range reads {
		if r.take(f, now, limit) < limit && r.read < len(r.cands) {
			more = append(more, r)
		}
	}
	// Past the leaders a page of 2*limit+20 candidates, then every one
	// left: the filter rejects few in most queries.
	for page := 2*limit + 20; len(more) > 0; page = 0 {
		if err := s.readRestVisibility(ctx, more, page); err != nil {
			return nil, left, err
		}
		short := more[:0]
		for _, r := range more {
			if r.take(f, now, limit) < limit && r.read < len(r.cands) {
				short = append(short, r)
			}
		}
		more = short
	}
	for _, r := range reads {
		all = append(all, r.out...)
	}
	return all, left, nil
}

// planReads is step 1 of Lexical: the dictionary script over the tags,
// and each tag's posting reads planned (tags with nothing to read left
// out). A tag of kind tagStats counts in the statistics only: its lists
// are marked subset with nothing to read (readAnywhere skips it), so that
// their document frequencies count in the groups' weights (score) as
// the lists' would if they were read.
func (s *Store) planReads(ctx context.Context, tags []scopeTag, qs []memory.LexTerm, minPer int) ([]*lexRead, error) {
	dicts, err := s.tagDictionaries(ctx, tags, qs)
	if err != nil {
		return nil, err
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
	weigh(reads, qs)
	reads = slices.DeleteFunc(reads, func(r *lexRead) bool { return len(r.lists) == 0 })
	subsets := s.reachReads(ctx)
	for _, r := range reads {
		r.plan(s.lexBudget, minPer)
		if (subsets && r.tag.kind == tagForeign) || r.tag.kind == tagStats {
			for _, l := range r.lists {
				l.planned = l.read // read so if its reach-anywhere postings are too many (readAnywhere)
				l.subset, l.truncated, l.read = true, false, 0
			}
		}
	}
	return reads, nil
}

// tagDictionaries is dictionaries for the tags, with the dictionaries of
// statistics-only tags (tagStats) taken from the statistics cache when
// every query term of theirs was read within statsTTL (statscache.go),
// and kept there when read.
func (s *Store) tagDictionaries(ctx context.Context, tags []scopeTag, qs []memory.LexTerm) ([][]string, error) {
	args := dictArgs(qs)
	if s.noStatsCache {
		return s.dictionaries(ctx, tags, qs, args)
	}
	terms := dictTerms(qs)
	now := s.now()
	out := make([][]string, len(tags))
	var rest []scopeTag
	var at []int // index in tags of rest[i]
	for i, t := range tags {
		if t.kind == tagStats {
			if d, ok := s.stats.get(s.keys(t.project).p, terms, now); ok {
				out[i] = d
				continue
			}
		}
		rest = append(rest, t)
		at = append(at, i)
	}
	if len(rest) == 0 {
		return out, nil
	}
	dicts, err := s.dictionaries(ctx, rest, qs, args)
	if err != nil {
		return nil, err
	}
	for j, d := range dicts {
		out[at[j]] = d
		if rest[j].kind == tagStats {
			s.stats.put(s.keys(rest[j].project).p, terms, d, now) // now: when the read started
		}
	}
	return out, nil
}

// dictArgs are lexDictScript's ARGV for the query terms qs, after the key
// prefix and the expansions.
func dictArgs(qs []memory.LexTerm) []any {
	terms := dictTerms(qs)
	args := make([]any, len(terms))
	for i, t := range terms {
		args[i] = t
	}
	return args
}

// dictTerms are dictArgs as strings: how the statistics cache names the
// query terms (statscache.go).
func dictTerms(qs []memory.LexTerm) []string {
	terms := make([]string, 0, len(qs))
	for _, q := range qs {
		arg := q.Prefix
		if utf8.RuneCountInString(arg) < memory.PrefixMin {
			arg = "=" + arg
		}
		terms = append(terms, arg+" "+strings.Join(q.Words, " "))
	}
	return terms
}

// weigh sets the BM25 statistics of the reads from their scopes together:
// the document count, the average length and every document frequency are
// summed over the scopes one query reads (the project, the tenant's global
// memories, other projects' reach-anywhere ones), so that a score means
// the same in each. Per scope, a memory alone in its scope would get the
// idf of a term that every document holds, and a block's relative floor
// would drop it beside the project's own matches.
//
// The lists' weights (w) plan the read budget: the idf of the query
// term's summed document frequency (an upper bound of the documents its
// group holds), and a word's own token memory.ExactWeight x its own idf
// more, both times the term's weight (memory.LexTerm: a stop word counts
// memory.StopWordWeight). The scores themselves are score's.
func weigh(reads []*lexRead, qs []memory.LexTerm) {
	q := &lexStats{tw: make([]float64, len(qs)), groupDF: make([]int64, len(qs)), wordDF: map[string]int64{}}
	for g, lt := range qs {
		q.tw[g] = lt.Weight
	}
	var total float64
	for _, r := range reads {
		q.n += r.n
		total += r.total
		r.q = q
		for _, l := range r.lists {
			q.groupDF[l.gi] += l.df
			if !l.exp {
				q.wordDF[l.term()] += l.df
			}
		}
	}
	avgdl := total / q.n
	if !(avgdl > 0) {
		avgdl = 1
	}
	for _, r := range reads {
		r.c1, r.c2 = bm25K1*(1-bm25B), bm25K1*bm25B/avgdl
		for _, l := range r.lists {
			w := q.idf(q.groupDF[l.gi])
			if !l.exp {
				w += memory.ExactWeight * q.idf(q.wordDF[l.term()])
			}
			l.w = w * q.tw[l.gi] * (bm25K1 + 1)
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

	q      *lexStats // the query's statistics over every scope read (weigh)
	docs   []lexDoc  // every document a read posting names (score), at index[id]
	index  map[string]int
	cands  []memory.Scored // the documents ranked by score (the leaders first)
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
	group string  // the query term it belongs to (lexDictScript's index)
	gi    int     // the query term it belongs to (its index in the query)
	w     float64 // its weight for the read budget (see weigh)
	// How score counts it: its frequency in its group's sum (inGroup), and
	// its own part at weight ew (a word's own token), only for documents
	// the rarer units found (foundOnly: a common word).
	inGroup   bool
	ew        float64
	foundOnly bool
	read      int64 // postings to read, best first

	ps  []goredis.Z        // the postings read, best first
	cmd *goredis.ZSliceCmd // a read of postings past headMax
	// Where reading stopped in a truncated list (equal scores come in
	// reverse member order) and the contribution of that last posting: no
	// unread posting contributes more.
	truncated bool
	// subset: a list of another project read through its reach-anywhere
	// postings (readAnywhere): ps holds every posting of the project's
	// nodes of reach anywhere, and only those; the rest of the list's df
	// counts as a truncated list's unread part does.
	subset     bool
	planned    int64 // a subset list's read as planned for the list itself
	stop       float64
	stopMember string
	last       float64
	missing    *goredis.FloatSliceCmd // the scores in this list of the leading candidates asked
	ask        []int                  // their indexes among the candidates
	idx        int                    // its index in the read's lists (lexDoc.lists)
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
		gi, ok := groupIndex(group, len(qs))
		if !ok {
			return nil, fmt.Errorf("redis lexical: query term %q of %s", group, d[i])
		}
		r.lists = append(r.lists, &postingList{key: d[i], df: df, exp: kind == "1", group: group, gi: gi})
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

// completeLeaders is step 3. The leading limit+10 candidates get the
// contributions of truncated lists they hold beyond where reading stopped,
// from the lists whose unread postings can still matter (more than 5% of
// the limit-th score; on the benchmark corpus 1% ranks the same); they
// get their filter fields too.
func (s *Store) completeLeaders(ctx context.Context, reads []*lexRead, limit int) error {
	heads := s.fieldsFromHeads(ctx)
	pipe := s.c.Pipeline()
	vis := make([]*goredis.SliceCmd, len(reads))
	for _, r := range reads {
		for _, l := range r.lists {
			l.missing = nil
		}
	}
	for i, r := range reads {
		if r.ranked == 0 {
			continue
		}
		kth := r.cands[min(r.ranked, limit)-1].Score
		lead := r.ids(0, min(r.ranked, limit+10))
		for li, l := range r.lists {
			if l.truncated && l.last*1.25 >= 0.05*kth {
				// A leader whose posting of the list was read has it
				// counted: only the others are asked.
				l.ask = l.ask[:0]
				var ids []string
				for j, id := range lead {
					if li >= 64 || r.docs[r.index[id]].lists&(1<<li) == 0 {
						l.ask = append(l.ask, j)
						ids = append(ids, id)
					}
				}
				if len(ids) > 0 {
					l.missing = pipe.ZMScore(ctx, l.key, ids...)
				}
			}
		}
		vis[i] = s.queueFields(ctx, pipe, r.keys, r.ids(0, r.ranked), heads)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("lexical leaders", err)
	}
	fields, err := s.fieldValues(ctx, reads, vis, 0, heads)
	if err != nil {
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
			for m, sc := range l.missing.Val() {
				if sc <= 0 {
					continue
				}
				if c := &r.cands[l.ask[m]]; sc < l.stop || (sc == l.stop && c.ID < l.stopMember) {
					tf, length := posting(sc)
					r.add(&r.docs[r.index[c.ID]], l.gi, tf, length, l.inGroup, l.ew)
				}
			}
		}
		for j := range min(r.ranked, limit+10) {
			c := &r.cands[j]
			c.Score = r.docScore(&r.docs[r.index[c.ID]])
		}
		r.keepVisibility(fields[i])
		sortScored(r.cands[:r.ranked])
	}
	return nil
}

// readRestVisibility is step 4: the filter fields of the next page
// candidates past those read (page 0: all of them), for the reads that
// found too few visible ones.
func (s *Store) readRestVisibility(ctx context.Context, reads []*lexRead, page int) error {
	heads := s.fieldsFromHeads(ctx)
	pipe := s.c.Pipeline()
	cmds := make([]*goredis.SliceCmd, len(reads))
	for i, r := range reads {
		to := len(r.cands)
		if page > 0 {
			to = min(to, r.read+page)
		}
		sortBest(r.cands[r.read:], to-r.read) // past those read, still in no order (see score)
		cmds[i] = s.queueFields(ctx, pipe, r.keys, r.ids(r.read, to), heads)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("lexical filter fields", err)
	}
	fields, err := s.fieldValues(ctx, reads, cmds, -1, heads)
	if err != nil {
		return s.wrap("lexical filter fields", err)
	}
	for i, r := range reads {
		r.keepVisibility(fields[i])
	}
	return nil
}

// fieldsFromHeads reports whether the candidates' filter fields are read
// from their heads (the packed-nodes hash, pn) rather than from the vis
// hash: within a Retrieve (memory.HeadCacheOf), at FormatNodeCopies. A
// head says what the filter fields say (both are written from the node in
// its MULTI), and it is kept for the Retrieve's candidate load, which
// then does not read those nodes again.
func (s *Store) fieldsFromHeads(ctx context.Context) bool {
	return memory.HeadCacheOf(ctx) != nil && s.nodeCopies(ctx)
}

// queueFields queues the read of the filter fields of ids, in one of k's
// hashes (see fieldsFromHeads).
func (s *Store) queueFields(ctx context.Context, pipe goredis.Pipeliner, k keys, ids []string, heads bool) *goredis.SliceCmd {
	if heads {
		return pipe.HMGet(ctx, k.packedNodes(), ids...)
	}
	return pipe.HMGet(ctx, k.vis(), ids...)
}

// fieldValues turns what queueFields read for each of reads (cmds[i] nil:
// none) into keepVisibility's values: the vis entries as read, or the
// heads unpacked (memory.Node, kept in the Retrieve's head cache); an id
// without a head (a node gone, or written before packing) gets its vis
// entry, read in one more round trip. from is where the ids start in each
// read's candidates (-1: at r.read).
func (s *Store) fieldValues(ctx context.Context, reads []*lexRead, cmds []*goredis.SliceCmd, from int, heads bool) ([][]any, error) {
	out := make([][]any, len(reads))
	type gap struct{ read, j int }
	var gaps []gap
	cache := memory.HeadCacheOf(ctx)
	for i, r := range reads {
		if cmds[i] == nil {
			continue
		}
		vals := cmds[i].Val()
		if !heads {
			out[i] = vals
			continue
		}
		start := from
		if start < 0 {
			start = r.read
		}
		out[i] = make([]any, len(vals))
		for j, v := range vals {
			pk, _ := v.(string)
			if pk == "" {
				gaps = append(gaps, gap{i, j})
				continue
			}
			n, err := unpackNode(pk)
			if err != nil {
				return nil, fmt.Errorf("head of %s: %w", r.cands[start+j].ID, err)
			}
			if n.ID != r.cands[start+j].ID {
				return nil, fmt.Errorf("head of %s holds node %s", r.cands[start+j].ID, n.ID)
			}
			cache.Put(n)
			out[i][j] = n
		}
	}
	if len(gaps) == 0 {
		return out, nil
	}
	pipe := s.c.Pipeline()
	gapCmds := make([]*goredis.StringCmd, len(gaps))
	for g, at := range gaps {
		r := reads[at.read]
		start := from
		if start < 0 {
			start = r.read
		}
		gapCmds[g] = pipe.HGet(ctx, r.keys.vis(), r.cands[start+at.j].ID)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, err
	}
	for g, at := range gaps {
		if v, err := gapCmds[g].Result(); err == nil {
			out[at.read][at.j] = v
		} else if !errors.Is(err, goredis.Nil) {
			return nil, err
		}
	}
	return out, nil
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
		if visibleValue(r.vis[c.ID], r.tag.project, f, now) {
			r.out = append(r.out, c)
		}
	}
	return len(r.out)
}

// visibleValue judges a candidate by what fieldValues read for it: its
// head (memory.Visible itself) or its vis entry (visibleFields); nothing
// (a node gone) is not visible.
func visibleValue(v any, project string, f memory.Filter, now time.Time) bool {
	switch v := v.(type) {
	case memory.Node:
		return memory.Visible(&v, f, now)
	case string:
		return visibleFields(v, project, f, now)
	}
	return false
}
