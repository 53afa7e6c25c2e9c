package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// The lexical channel's first step, the dictionary: which posting lists a
// query term reads (its prefix's first expansions in dictionary order and
// its words' own tokens) and their document frequencies. lexDictScript
// answers it in one script per scope tag, and was the largest part of a
// turn's Redis time: on the injector benchmark at 100,000 memories about
// 0.7 ms of the server's 1.5 ms a turn went to scripts, most of it the
// dictionary's Lua (a ZRANGEBYLEX per query term, a key built and a ZCARD
// per list, every reply turned into Lua strings).
//
// So the store keeps each prefix's dictionary range (ZRANGEBYLEX
// [q [q\xff LIMIT 0 maxExpansions+1) in memory, with the version of its
// bucket, and a query asks the server only for plain, pipelined reads:
// the corpus statistics (HMGET), the versions of its prefixes' buckets
// (one HMGET) and the lists' document frequencies (from FormatDocFreqs one
// HMGET of the document frequencies hash, K df; before it a ZCARD per
// list). The reply is built here as the script
// builds it (dictReply); when a bucket's version differs from the one
// cached, the cached ranges of that bucket are dropped and that tag's
// dictionary is asked of the script, in a second round trip
// (TestDictionaryCacheMatchesScript). A range missing from the cache is
// read first (the bucket versions, then the ranges, one pipeline).
//
// Versions: a term's bucket is its first dictBucketBytes bytes (every term
// of a prefix's range shares the prefix's bucket: a prefix matched as a
// prefix has at least memory.PrefixMin runes). The dictionary versions
// hash (K dv: field of the bucket -> token; the field is a hash of the
// bucket, dictBucket, so that the hash holds no term: a term of up to
// three bytes would otherwise outlive its memories' erasure, and the
// erasure cannot tell whether another memory still holds the bucket)
// holds, per bucket, the token of the last
// write that added a term to the dictionary or dropped one from it;
// reindexLexScript and relexScript set it in the script that changes the
// dictionary, with a random token per call (dictToken), so a version
// never repeats, also after a project is erased and written again. A
// write that adds postings to known terms changes no version: only the
// document frequencies change, and those are read each time. A write of
// up to dictFineDocs documents sets the buckets of its new terms only (a
// memory written after a turn, with one new word, leaves the next
// query's buckets alone); an import's chunk, when it added any term, the
// buckets of all its terms (index.go, reindexLexScript). Data from
// before the versions has no dv hash, which reads as one version per
// bucket until a write sets it: no migration. A replica from before the
// versions does not set them: during a rolling upgrade its new terms
// reach the other replicas' queries when their cached range expires
// (dictTTL).
const (
	dictBucketBytes = 3    // memory.PrefixMin runes are at least 3 bytes
	dictFields      = 4096 // fields of the dictionary versions hash (dictBucket)
	dictTTL         = time.Minute
	dictCacheMax    = 16384 // ranges cached per store (then the cache starts afresh)
)

func (k keys) dictVersions() string { return k.p + "dv" }

// dictToken is a fresh version for the buckets one write changes.
func dictToken() string {
	return strconv.FormatUint(rand.Uint64(), 36)
}

// dictBucket is the field of a term's bucket in the dictionary versions
// hash: not the bucket's bytes (a term of up to dictBucketBytes bytes
// would be stored whole, and would outlive its memories' erasure) but
// "#" and three hex digits of FNV-1a of them, modulo dictFields. Two
// buckets that share a field cost each other's writes a cached range
// (one more script call), never a wrong answer. The scripts that set
// versions compute it alike (luaDictField); TestDictFieldMatchesScript.
func dictBucket(t string) string {
	if len(t) > dictBucketBytes {
		t = t[:dictBucketBytes]
	}
	h := uint32(2166136261)
	for i := 0; i < len(t); i++ {
		h ^= uint32(t[i])
		h *= 16777619
	}
	return fmt.Sprintf("#%03x", h%dictFields)
}

// luaDictField is dictBucket in the scripts (Lua 5.1 numbers are doubles:
// the product modulo 2^32 is h<<24 + h*403, normalised by bit.tobit).
var luaDictField = `local function dictField(t)
  local h = bit.tobit(2166136261)
  for i = 1, math.min(#t, ` + strconv.Itoa(dictBucketBytes) + `) do
    h = bit.bxor(h, string.byte(t, i))
    h = bit.tobit(bit.lshift(h, 24) + h * 403)
  end
  return string.format('#%03x', bit.band(h, ` + strconv.Itoa(dictFields-1) + `))
end
`

// dictRange is a prefix's cached dictionary range.
type dictRange struct {
	ver   string   // its bucket's version when it was read ("" for none)
	terms []string // the first maxExpansions+1 terms from the prefix on
	at    time.Time
}

// dictCache holds the ranges by key prefix + "t:" + prefix.
type dictCache struct {
	mu sync.Mutex
	m  map[string]dictRange
}

func (c *dictCache) get(key string, now time.Time) (dictRange, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[key]
	if ok && now.Sub(r.at) >= dictTTL {
		delete(c.m, key)
		ok = false
	}
	return r, ok
}

func (c *dictCache) put(key string, r dictRange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= dictCacheMax {
		c.m = make(map[string]dictRange)
	}
	c.m[key] = r
}

func (c *dictCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// dropPrefix drops the ranges of the project of keys prefix p (its
// erasure).
func (c *dictCache) dropPrefix(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if strings.HasPrefix(k, p) {
			delete(c.m, k)
		}
	}
}

// needsRange reports whether a query term's lists depend on the
// dictionary: a prefix matched as a prefix, or a short one with a word
// other than itself (memory.LexTerms makes none: a word under
// memory.StemPrefixMin letters is its own prefix). A short prefix whose
// only word is itself reads its own token only.
func needsRange(q memory.LexTerm) bool {
	if utf8.RuneCountInString(q.Prefix) >= memory.PrefixMin {
		return true
	}
	for _, w := range q.Words {
		if w != q.Prefix {
			return true
		}
	}
	return false
}

// dictPlan is one tag's dictionary read.
type dictPlan struct {
	k       keys
	ranges  []*dictRange // per query term its cached range (nil: needs none)
	rkeys   []string     // per query term its cache key
	buckets []string     // the buckets of the ranges used
	stats   *goredis.SliceCmd
	vers    *goredis.SliceCmd
	dfTerms []string          // the lists whose document frequencies are read
	dfIndex map[string]int    // index in dfTerms by term
	zcards  []*goredis.IntCmd // per dfTerms a ZCARD (below FormatDocFreqs)
	dfHash  *goredis.SliceCmd // or one HMGET of the document frequencies hash
	eval    *goredis.Cmd      // lexDictScript's answer, when a range was missing
	script  bool              // to be answered by lexDictScript
}

// dictionaries answers, per tag, what lexDictScript answers for the query
// terms qs (args: its ARGV after the key prefix).
func (s *Store) dictionaries(ctx context.Context, tags []scopeTag, qs []memory.LexTerm, args []any) ([][]string, error) {
	for _, q := range qs {
		// A short prefix with other words would need a range whose terms
		// lie in other buckets than its own: the script answers it.
		if needsRange(q) && len(q.Prefix) < dictBucketBytes {
			return s.dictScript(ctx, tags, args)
		}
	}
	if s.noDictCache {
		return s.dictScript(ctx, tags, args)
	}
	now := time.Now()
	plans := make([]*dictPlan, len(tags))
	type miss struct {
		plan int
		qi   int
	}
	var misses []miss
	for i, tag := range tags {
		p := &dictPlan{k: s.keys(tag.project), ranges: make([]*dictRange, len(qs)), rkeys: make([]string, len(qs))}
		plans[i] = p
		for qi, q := range qs {
			if !needsRange(q) {
				continue
			}
			p.rkeys[qi] = p.k.p + "t:" + q.Prefix
			if r, ok := s.dict.get(p.rkeys[qi], now); ok {
				p.ranges[qi] = &r
			} else {
				misses = append(misses, miss{i, qi})
			}
		}
	}
	// One pipeline: a tag whose ranges are all cached gets the plain
	// reads; a tag with a range missing gets the script (as the steady
	// state costs one round trip, a cold query does not cost two) and the
	// reads of its missing ranges for the next query: the versions first,
	// then the ranges, so that a write between the two leaves a version
	// older than the range, which the next check finds changed.
	// From FormatDocFreqs the document frequencies are one HMGET a tag
	// (the df hash: every list's length, set with the list); before it a
	// ZCARD a list.
	docFreqs := s.docFreqs(ctx)
	missing := make([]bool, len(plans))
	for _, m := range misses {
		missing[m.plan] = true
	}
	pipe := s.c.Pipeline()
	vers := make([]*goredis.SliceCmd, len(misses))
	rngs := make([]*goredis.StringSliceCmd, len(misses))
	for j, m := range misses {
		p, q := plans[m.plan], qs[m.qi].Prefix
		vers[j] = pipe.HMGet(ctx, p.k.dictVersions(), dictBucket(q))
		rngs[j] = pipe.ZRangeByLex(ctx, p.k.terms(), &goredis.ZRangeBy{Min: "[" + q, Max: "[" + q + "\xff", Count: maxExpansions + 1})
	}
	for i, p := range plans {
		if missing[i] {
			p.eval = lexDictScript.EvalSha(ctx, pipe, []string{p.k.terms(), p.k.stats()}, append([]any{p.k.p, maxExpansions}, args...)...)
			continue
		}
		p.stats = pipe.HMGet(ctx, p.k.stats(), "n", "l")
		seen := map[string]bool{}
		for qi, r := range p.ranges {
			if r != nil && !seen[dictBucket(qs[qi].Prefix)] {
				seen[dictBucket(qs[qi].Prefix)] = true
				p.buckets = append(p.buckets, dictBucket(qs[qi].Prefix))
			}
		}
		if len(p.buckets) > 0 {
			p.vers = pipe.HMGet(ctx, p.k.dictVersions(), p.buckets...)
		}
		p.dfIndex = map[string]int{}
		for qi, q := range qs {
			for _, l := range dictLists(q, p.ranges[qi]) {
				if _, ok := p.dfIndex[l.term]; !ok {
					p.dfIndex[l.term] = len(p.dfTerms)
					p.dfTerms = append(p.dfTerms, l.term)
				}
			}
		}
		switch {
		case len(p.dfTerms) == 0:
		case docFreqs:
			p.dfHash = pipe.HMGet(ctx, p.k.docFreqs(), p.dfTerms...)
		default:
			p.zcards = make([]*goredis.IntCmd, len(p.dfTerms))
			for j, t := range p.dfTerms {
				p.zcards[j] = pipe.ZCard(ctx, p.k.p+"t:"+t)
			}
		}
	}
	// Exec reports only the first failed command: each command's own
	// error is checked, and only a NOSCRIPT of lexDictScript is forgiven
	// (the script is loaded by dictScript below). Any other failure, also
	// one after a NOSCRIPT, is the query's error.
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		for _, c := range cmds {
			if e := c.Err(); e != nil && !(c.Name() == "evalsha" && goredis.HasErrorPrefix(e, "NOSCRIPT")) {
				return nil, s.wrap("lexical dictionary", e)
			}
		}
		for _, p := range plans {
			if p.eval != nil && p.eval.Err() != nil { // NOSCRIPT, the only error left
				p.script, p.eval = true, nil // dictScript loads it
			}
		}
	}
	for j, m := range misses {
		v, _ := vers[j].Val()[0].(string)
		s.dict.put(plans[m.plan].rkeys[m.qi], dictRange{ver: v, terms: rngs[j].Val(), at: now})
	}
	out := make([][]string, len(tags))
	var stale []int
	for i, p := range plans {
		if p.eval != nil {
			if out[i], err = p.eval.StringSlice(); err != nil {
				return nil, s.wrap("lexical", err)
			}
			continue
		}
		if p.vers != nil {
			cur := map[string]string{}
			for j, v := range p.vers.Val() {
				cur[p.buckets[j]], _ = v.(string)
			}
			for qi, r := range p.ranges {
				if r != nil && r.ver != cur[dictBucket(qs[qi].Prefix)] {
					s.dict.drop(p.rkeys[qi])
					p.script = true
				}
			}
		}
		if p.script {
			stale = append(stale, i)
			continue
		}
		if out[i], err = p.reply(qs); errors.Is(err, errDocFreqMissing) {
			stale = append(stale, i)
		} else if err != nil {
			return nil, s.wrap("lexical dictionary", err)
		}
	}
	if len(stale) > 0 {
		sub := make([]scopeTag, len(stale))
		for j, i := range stale {
			sub[j] = tags[i]
		}
		d, err := s.dictScript(ctx, sub, args)
		if err != nil {
			return nil, err
		}
		for j, i := range stale {
			out[i] = d[j]
		}
	}
	return out, nil
}

// dictScript is lexDictScript over the tags.
func (s *Store) dictScript(ctx context.Context, tags []scopeTag, args []any) ([][]string, error) {
	d, err := s.evalTags(ctx, lexDictScript, len(tags), func(i int) ([]string, []any) {
		k := s.keys(tags[i].project)
		return []string{k.terms(), k.stats()}, append([]any{k.p, maxExpansions}, args...)
	})
	if err != nil {
		return nil, s.wrap("lexical", err)
	}
	return d, nil
}

// dictList is a list a query term may read: a term of its prefix's range
// that lexDictScript keeps, or one of its words.
type dictList struct {
	term string
	word bool // a word of the query term (kind "0")
	rng  bool // from the range (else from the words, after it)
}

// dictLists are the lists lexDictScript considers for query term q, in its
// order: the terms of the range it keeps (the prefix, the words, and the
// first maxExpansions longer terms unless the prefix is short), then the
// words. A word may come twice; the reply keeps its first with a
// document frequency.
func dictLists(q memory.LexTerm, r *dictRange) []dictList {
	whole := utf8.RuneCountInString(q.Prefix) < memory.PrefixMin
	var out []dictList
	if r != nil {
		longer := 0
		for _, t := range r.terms {
			if t != q.Prefix {
				longer++
			}
			word := slices.Contains(q.Words, t)
			if t == q.Prefix || word || (!whole && longer <= maxExpansions) {
				out = append(out, dictList{term: t, word: word, rng: true})
			}
		}
	}
	for _, w := range q.Words {
		out = append(out, dictList{term: w, word: true})
	}
	return out
}

// df is the document frequency of a list read by p: its ZCARD, or its
// field of the document frequencies hash (0 when absent: an empty list).
// A term of the dictionary's range (inRange) holds a list, so its field
// missing means the hash is not what FormatDocFreqs promises (a replica of
// an earlier version wrote since the format was raised, an erasure raced
// a write): errDocFreqMissing, and the read asks the lists themselves
// (lexDictScript) instead of leaving the term out.
func (p *dictPlan) df(term string, inRange bool) (int64, error) {
	j := p.dfIndex[term]
	if p.dfHash == nil {
		return p.zcards[j].Val(), nil
	}
	v, _ := p.dfHash.Val()[j].(string)
	if v == "" {
		if inRange {
			return 0, errDocFreqMissing
		}
		return 0, nil
	}
	df, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("document frequency of %q in %s: %q", term, p.k.docFreqs(), v)
	}
	return df, nil
}

// reply is lexDictScript's reply from the reads of p (all of which
// succeeded).
func (p *dictPlan) reply(qs []memory.LexTerm) ([]string, error) {
	st := p.stats.Val()
	if len(st) != 2 {
		return nil, fmt.Errorf("corpus statistics %s: %d values, want 2", p.k.stats(), len(st))
	}
	n, _ := st[0].(string)
	l, _ := st[1].(string)
	if n == "" {
		n = "0"
	}
	if l == "" {
		l = "0"
	}
	out := []string{n, l}
	if v, err := strconv.ParseFloat(n, 64); err != nil || v <= 0 {
		return out, nil
	}
	for qi, q := range qs {
		seen := map[string]bool{}
		group := strconv.Itoa(qi + lexDictFirstTerm)
		for _, l := range dictLists(q, p.ranges[qi]) {
			if seen[l.term] {
				continue
			}
			df, err := p.df(l.term, l.rng)
			if err != nil {
				return nil, err
			}
			if !l.rng {
				// The script's words loop marks a word seen whether or not
				// its list holds anything; the range marks only lists it keeps.
				seen[l.term] = true
			}
			if df <= 0 {
				continue
			}
			seen[l.term] = true
			kind := "1:"
			if l.word {
				kind = "0:"
			}
			out = append(out, p.k.p+"t:"+l.term, strconv.FormatInt(df, 10), kind+group)
		}
	}
	return out, nil
}

// errDocFreqMissing: a term of the dictionary has no document frequency
// (see dictPlan.df).
var errDocFreqMissing = errors.New("redis memory store: a term of the dictionary has no document frequency")
