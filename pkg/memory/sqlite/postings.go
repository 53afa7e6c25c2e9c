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

// add appends p, a posting of a document of length tokens.
func (tm *term) add(p posting, length uint32) {
	n := len(tm.postings)
	tm.postings = append(tm.postings, p)
	if tm.sorted == n && (n == 0 || tm.postings[n-1].rid <= p.rid) {
		tm.sorted++
	} else if len(tm.postings)-tm.sorted > tailMax(tm.sorted) {
		tm.sortTail()
	}
	tm.df++
	tm.ver++
	tm.maxTF = max(tm.maxTF, p.tf)
	if n == 0 || length < tm.minLen {
		tm.minLen = length
	}
}

func byRid(a, b posting) int { return cmp.Compare(a.rid, b.rid) }

// sortTail sorts the tail and merges it into the sorted part (in place,
// from the end).
func (tm *term) sortTail() {
	ps := tm.postings
	tail := slices.Clone(ps[tm.sorted:])
	slices.SortStableFunc(tail, byRid)
	i, j := tm.sorted-1, len(tail)-1
	for k := len(ps) - 1; j >= 0; k-- {
		if i >= 0 && ps[i].rid > tail[j].rid {
			ps[k] = ps[i]
			i--
		} else {
			ps[k] = tail[j]
			j--
		}
	}
	tm.sorted = len(ps)
}

// sortAll puts every posting in rid order (compact, after dropping the
// stale ones).
func (tm *term) sortAll() {
	if !slices.IsSortedFunc(tm.postings, byRid) {
		slices.SortStableFunc(tm.postings, byRid)
	}
	tm.sorted = len(tm.postings)
}

// seek returns the index of the first sorted posting at or after from
// whose rid is at least rid (galloping: cheap when the next candidate is
// near).
func (tm *term) seek(from int, rid uint32) int {
	ps := tm.postings[:tm.sorted]
	if from >= len(ps) || ps[from].rid >= rid {
		return from
	}
	lo, step := from, 1
	hi := from + step
	for hi < len(ps) && ps[hi].rid < rid {
		lo = hi
		step *= 2
		hi = lo + step
	}
	hi = min(hi, len(ps))
	// ps[lo].rid < rid; the answer is in (lo, hi].
	i, _ := slices.BinarySearchFunc(ps[lo+1:hi], rid, func(p posting, r uint32) int { return cmp.Compare(p.rid, r) })
	return lo + 1 + i
}

// candidates appends to out the live postings of tm whose document is
// among cands (sorted rids, also set in mark): found by binary search in
// the sorted part when the candidates are few against the list, by
// reading it otherwise, and by reading the tail.
func (x *lexIndex) candidates(tm *term, cands []uint32, mark []uint64, out []posting) []posting {
	ps := tm.postings
	if sorted := tm.sorted; len(cands)*seekCost(sorted) < sorted {
		at := 0
		for _, rid := range cands {
			at = tm.seek(at, rid)
			for ; at < sorted && ps[at].rid == rid; at++ {
				if p := ps[at]; tm.stale == 0 || x.gen[p.rid] == p.gen {
					out = append(out, p)
				}
			}
			if at >= sorted {
				break
			}
		}
		ps = ps[sorted:]
	}
	for _, p := range ps {
		if mark[p.rid>>6]&(1<<(p.rid&63)) != 0 && (tm.stale == 0 || x.gen[p.rid] == p.gen) {
			out = append(out, p)
		}
	}
	return out
}

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
		for _, p := range tm.postings {
			if tm.stale > 0 && x.gen[p.rid] != p.gen {
				continue
			}
			w, b := p.rid>>6, uint64(1)<<(p.rid&63)
			if sc.seen[w]&b == 0 {
				sc.seen[w] |= b
				df++
			}
		}
	}
	for _, tm := range lists {
		for _, p := range tm.postings {
			sc.seen[p.rid>>6] = 0
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
