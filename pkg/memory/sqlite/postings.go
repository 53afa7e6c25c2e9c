package sqlite

import (
	"cmp"
	"slices"
	"sync"
)

// Posting lists are kept in rid order so that pruned queries (prune.go)
// can look a few candidate documents up in a long list by binary search
// instead of reading all of it. Writes mostly come in rid order (a new
// node gets the next rid; the load reads a project's rows in order); the
// others (a node re-indexed, the projects of a load interleaved) go to a
// tail in the order written, which is sorted and merged into the list
// once it outgrows tailMax of it: a posting is moved about sortShare
// times, amortised, and a search reads at most the tail in full.

// tailMax is how long the unsorted tail of a list of sorted postings may
// grow before it is merged (a sixteenth of the sorted part, at least 64).
func tailMax(sorted int) int { return 64 + sorted/16 }

// add appends the posting of document rid (tf its count of the term, of
// length tokens).
func (tm *term) add(rid uint32, tf uint16, length uint32) {
	n := len(tm.rids)
	tm.rids = append(tm.rids, rid)
	tm.tfs = append(tm.tfs, tf)
	if tm.sorted == n && (n == 0 || tm.rids[n-1] <= rid) {
		tm.sorted++
	} else if len(tm.rids)-tm.sorted > tailMax(tm.sorted) {
		tm.sortTail()
	}
	tm.df++
	tm.ver++
	tm.maxTF = max(tm.maxTF, tf)
	if n == 0 || length < tm.minLen {
		tm.minLen = length
	}
}

// kill marks the live posting of document rid stale (tf 0): found by
// binary search in the sorted part, else in the tail (newest first).
func (tm *term) kill(rid uint32) {
	at, _ := slices.BinarySearch(tm.rids[:tm.sorted], rid)
	for ; at < tm.sorted && tm.rids[at] == rid; at++ {
		if tm.tfs[at] != 0 {
			tm.tfs[at] = 0
			return
		}
	}
	for i := len(tm.rids) - 1; i >= tm.sorted; i-- {
		if tm.rids[i] == rid && tm.tfs[i] != 0 {
			tm.tfs[i] = 0
			return
		}
	}
}

func byRid(a, b posting) int { return cmp.Compare(a.rid, b.rid) }

// sortTail sorts the tail and merges it into the sorted part (in place,
// from the end).
func (tm *term) sortTail() {
	tail := make([]posting, len(tm.rids)-tm.sorted)
	for k := range tail {
		tail[k] = posting{tm.rids[tm.sorted+k], tm.tfs[tm.sorted+k]}
	}
	slices.SortStableFunc(tail, byRid)
	rids, tfs := tm.rids, tm.tfs
	i, j := tm.sorted-1, len(tail)-1
	for k := len(rids) - 1; j >= 0; k-- {
		if i >= 0 && rids[i] > tail[j].rid {
			rids[k], tfs[k] = rids[i], tfs[i]
			i--
		} else {
			rids[k], tfs[k] = tail[j].rid, tail[j].tf
			j--
		}
	}
	tm.sorted = len(rids)
}

// sortAll puts every posting in rid order (compact, after dropping the
// stale ones).
func (tm *term) sortAll() {
	tm.sorted = 0
	for tm.sorted < len(tm.rids) && (tm.sorted == 0 || tm.rids[tm.sorted-1] <= tm.rids[tm.sorted]) {
		tm.sorted++
	}
	if tm.sorted < len(tm.rids) {
		tm.sortTail()
	}
}

// seek returns the index of the first sorted posting at or after from
// whose rid is at least rid (galloping: cheap when the next candidate is
// near).
func (tm *term) seek(from int, rid uint32) int {
	rs := tm.rids[:tm.sorted]
	if from >= len(rs) || rs[from] >= rid {
		return from
	}
	lo, step := from, 1
	hi := from + step
	for hi < len(rs) && rs[hi] < rid {
		lo = hi
		step *= 2
		hi = lo + step
	}
	hi = min(hi, len(rs))
	// rs[lo] < rid; the answer is in (lo, hi].
	i, _ := slices.BinarySearch(rs[lo+1:hi], rid)
	return lo + 1 + i
}

// candidates appends to out the live postings of tm whose document is
// among cands (sorted rids, also set in mark): found by binary search in
// the sorted part when the candidates are few against the list, by
// reading it otherwise, and by reading the tail.
func (x *lexIndex) candidates(tm *term, cands []uint32, mark []uint64, out []posting) []posting {
	rids, tfs := tm.rids, tm.tfs[:len(tm.rids)]
	from := 0
	if sorted := tm.sorted; tm.seekable(len(cands)) {
		at := 0
		for _, rid := range cands {
			at = tm.seek(at, rid)
			for ; at < sorted && rids[at] == rid; at++ {
				if tfs[at] != 0 {
					out = append(out, posting{rid, tfs[at]})
				}
			}
			if at >= sorted {
				break
			}
		}
		from = sorted
	}
	for i := from; i < len(rids); i++ {
		rid := rids[i]
		if mark[rid>>6]&(1<<(rid&63)) != 0 && tfs[i] != 0 {
			out = append(out, posting{rid, tfs[i]})
		}
	}
	return out
}

// seekable reports whether n candidates are looked up in tm's sorted
// part by binary search rather than by reading it.
func (tm *term) seekable(n int) bool { return n*seekCost(tm.sorted) < tm.sorted }

// seekCost estimates the postings' worth of work of one seek in a sorted
// list of n (a binary search's steps, each a cache miss).
func seekCost(n int) int {
	c := 4
	for ; n > 1; n >>= 1 {
		c++
	}
	return c
}

// unionDF counts the live documents holding any of lists (the document
// frequency of a stem group), from a cache while none of the lists'
// documents changed: a pruned query scores a group on a few candidates
// only, but its idf needs the count over every posting.
func (x *lexIndex) unionDF(lists []*term, sc *scratch) int {
	if len(lists) == 1 {
		return lists[0].df
	}
	key := make([]byte, 0, 4*len(lists))
	var ver uint64
	for _, tm := range lists {
		id := x.ids[tm.name]
		key = append(key, byte(id), byte(id>>8), byte(id>>16), byte(id>>24))
		ver += uint64(tm.ver)
	}
	if df, ok := x.dfCache.get(string(key), ver); ok {
		return df
	}
	n := len(x.docLen)
	if words := n/64 + 1; len(sc.seen) < words {
		sc.seen = make([]uint64, words+words/4)
	}
	df := 0
	for _, tm := range lists {
		for i, rid := range tm.rids {
			if tm.tfs[i] == 0 {
				continue
			}
			w, b := rid>>6, uint64(1)<<(rid&63)
			if sc.seen[w]&b == 0 {
				sc.seen[w] |= b
				df++
			}
		}
	}
	for _, tm := range lists {
		for _, rid := range tm.rids {
			sc.seen[rid>>6] = 0
		}
	}
	x.dfCache.put(string(key), ver, df)
	return df
}

// dfCache holds the union counts of stem groups, each with the sum of its
// terms' versions when counted (versions only grow: an equal sum means no
// term changed). Searches share it under their read lock, hence its own.
type dfCache struct {
	mu sync.Mutex
	m  map[string]cachedDF
}

type cachedDF struct {
	ver uint64
	df  int
}

// dfCacheMax bounds the cache (it is emptied when full).
const dfCacheMax = 1 << 14

func (c *dfCache) get(key string, ver uint64) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	return e.df, ok && e.ver == ver
}

func (c *dfCache) put(key string, ver uint64, df int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= dfCacheMax {
		c.m = map[string]cachedDF{}
	}
	c.m[key] = cachedDF{ver, df}
}
