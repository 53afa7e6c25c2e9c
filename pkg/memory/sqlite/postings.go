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
// length tokens): in rid order it extends the sorted postings (packed in
// blocks, see blocks.go, when pack is set), else the tail.
func (tm *term) add(rid uint32, tf uint16, length uint32, pack bool) {
	n := len(tm.rids)
	tm.rids = append(tm.rids, rid)
	tm.tfs = append(tm.tfs, tf)
	if tm.run == n && (n > 0 && tm.rids[n-1] <= rid || n == 0 && (tm.nblocks() == 0 || tm.lastPacked() <= rid)) {
		if tm.run++; pack && tm.run >= blockLen {
			tm.packRun()
		}
	} else if len(tm.rids)-tm.run > tailMax(tm.sortedLen()) {
		tm.sortTail(pack)
	}
	tm.df++
	tm.ver++
	tm.maxTF = max(tm.maxTF, tf)
	if tm.count() == 1 || length < tm.minLen {
		tm.minLen = length
	}
}

// kill marks the live posting of document rid stale (tf 0): found in the
// blocks that may hold it, else by binary search in the plain sorted
// postings, else in the tail (newest first). It reports whether it found
// one. (Its callers clear the dense copy: dense.go.)
func (tm *term) kill(rid uint32) bool {
	if nb := tm.nblocks(); nb > 0 && tm.blockFirst(0) <= rid {
		var buf blockBuf
		// From the last block starting below rid (a document's stale
		// and live postings may straddle two blocks).
		for b := tm.blockFor(0, rid); b < nb && tm.blockFirst(b) <= rid; b++ {
			tm.block(b, &buf)
			for i, r := range buf.rids {
				if r == rid && buf.tfs[i] != 0 {
					tm.clearTF(b, i)
					return true
				}
			}
		}
	}
	at, _ := slices.BinarySearch(tm.rids[:tm.run], rid)
	for ; at < tm.run && tm.rids[at] == rid; at++ {
		if tm.tfs[at] != 0 {
			tm.tfs[at] = 0
			return true
		}
	}
	for i := len(tm.rids) - 1; i >= tm.run; i-- {
		if tm.rids[i] == rid && tm.tfs[i] != 0 {
			tm.tfs[i] = 0
			return true
		}
	}
	return false
}

// blockFor returns the last block from b on whose first rid is below rid
// (b when there is none): the first that may hold rid.
func (tm *term) blockFor(b int, rid uint32) int {
	lo, hi := b+1, tm.nblocks()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if tm.blockFirst(m) < rid {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

func byRid(a, b posting) int { return cmp.Compare(a.rid, b.rid) }

// sortTail sorts the tail and merges it into the sorted postings: the
// blocks wholly before the tail's first rid stay as they are, the rest
// are packed again with it (when pack is set; plain otherwise).
func (tm *term) sortTail(pack bool) {
	tail := make([]posting, len(tm.rids)-tm.run)
	for k := range tail {
		tail[k] = posting{tm.rids[tm.run+k], tm.tfs[tm.run+k]}
	}
	slices.SortStableFunc(tail, byRid)
	nb := tm.nblocks()
	keep := 0
	for keep+1 < nb && tm.blockFirst(keep+1) <= tail[0].rid {
		keep++ // block keep ends at or before the next one's first rid
	}
	if keep == nb-1 && nb > 0 && tm.lastPacked() <= tail[0].rid {
		keep = nb
	}
	if keep == nb {
		// Every block stays: the plain postings are merged in place, from
		// the end.
		rids, tfs := tm.rids, tm.tfs
		i, j := tm.run-1, len(tail)-1
		for k := len(rids) - 1; j >= 0; k-- {
			if i >= 0 && rids[i] > tail[j].rid {
				rids[k], tfs[k] = rids[i], tfs[i]
				i--
			} else {
				rids[k], tfs[k] = tail[j].rid, tail[j].tf
				j--
			}
		}
		if tm.run = len(rids); pack {
			tm.packRun()
		}
		return
	}
	seq := make([]posting, 0, (nb-keep)*blockLen+tm.run)
	var buf blockBuf
	for b := keep; b < nb; b++ {
		tm.block(b, &buf)
		for i, r := range buf.rids {
			seq = append(seq, posting{r, buf.tfs[i]})
		}
	}
	for i := range tm.run {
		seq = append(seq, posting{tm.rids[i], tm.tfs[i]})
	}
	// Merge, a sorted posting before a tail one of the same rid.
	merged := make([]posting, 0, len(seq)+len(tail))
	i, j := 0, 0
	for i < len(seq) && j < len(tail) {
		if seq[i].rid <= tail[j].rid {
			merged = append(merged, seq[i])
			i++
		} else {
			merged = append(merged, tail[j])
			j++
		}
	}
	merged = append(append(merged, seq[i:]...), tail[j:]...)
	if keep < nb {
		end := int(tm.bl.skip[2*keep+1])
		tm.bl.skip = tm.bl.skip[:2*keep]
		tm.bl.data = append(tm.bl.data[:end], make([]byte, blockPad)...)
		if keep == 0 {
			tm.bl = nil
		}
	}
	tm.addPacked(merged, pack)
}

// seek returns the index of the first plain sorted posting at or after
// from whose rid is at least rid (galloping: cheap when the next
// candidate is near).
func (tm *term) seek(from int, rid uint32) int {
	rs := tm.rids[:tm.run]
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
// among cands (sorted rids, also set in mark): from its dense copy when it
// has one (dense.go); when the candidates are few
// against the list (seekable), found in the blocks that may hold them
// (decoded into buf) and by binary search in the plain sorted postings;
// otherwise by reading the list; and by reading the tail.
func (x *lexIndex) candidates(tm *term, cands []uint32, mark []uint64, out []posting, buf *blockBuf) []posting {
	if tm.dense {
		d := x.dense[tm.id]
		for _, rid := range cands {
			if int(rid) < len(d) && d[rid] != 0 {
				out = append(out, posting{rid, d[rid]})
			}
		}
		return out
	}
	if !tm.seekable(len(cands)) {
		for p := range tm.parts() {
			rids, tfs := tm.part(p, buf)
			tfs = tfs[:len(rids)]
			for i, rid := range rids {
				if mark[rid>>6]&(1<<(rid&63)) != 0 && tfs[i] != 0 {
					out = append(out, posting{rid, tfs[i]})
				}
			}
		}
		return out
	}
	c := 0
	if nb := tm.nblocks(); nb > 0 {
		b, have, at := 0, -1, 0
		for c < len(cands) && b < nb {
			rid := cands[c]
			if to := tm.blockFor(b, rid); to != b {
				b, at = to, 0
			}
			if have != b {
				tm.block(b, buf)
				have = b
			}
			for at < blockLen && buf.rids[at] < rid {
				at++
			}
			for ; at < blockLen && buf.rids[at] == rid; at++ {
				if buf.tfs[at] != 0 {
					out = append(out, posting{rid, buf.tfs[at]})
				}
			}
			if at == blockLen { // rid may go on in the next block
				b, at = b+1, 0
				continue
			}
			c++
		}
	}
	rids, tfs := tm.rids, tm.tfs[:len(tm.rids)]
	if run := tm.run; run > 0 {
		at := 0
		for _, rid := range cands[c:] {
			at = tm.seek(at, rid)
			for ; at < run && rids[at] == rid; at++ {
				if tfs[at] != 0 {
					out = append(out, posting{rid, tfs[at]})
				}
			}
			if at >= run {
				break
			}
		}
	}
	for i := tm.run; i < len(rids); i++ {
		rid := rids[i]
		if mark[rid>>6]&(1<<(rid&63)) != 0 && tfs[i] != 0 {
			out = append(out, posting{rid, tfs[i]})
		}
	}
	return out
}

// seekable reports whether n candidates are looked up in tm's sorted
// postings (a binary search each, and a block decoded for each block they
// fall in) rather than by reading them all.
func (tm *term) seekable(n int) bool {
	sorted := tm.sortedLen()
	return n*seekCost(sorted)+min(n, tm.nblocks())*blockLen < sorted
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
		return x.dfOf(lists[0], sc.tenant)
	}
	key, ver := x.unionKey(lists, sc)
	if df, ok := x.dfCache.get(key, ver); ok {
		return df
	}
	sc.sizeSeen(len(x.docLen))
	df := 0
	keep := x.keepTenant(sc.tenant)
	for _, tm := range lists {
		df = sc.markLive(tm, df, 0, keep)
	}
	sc.clearSeen()
	x.dfCache.put(key, ver, df)
	return df
}

// unionKey is the key of lists' union in x.dfCache (for sc's tenant) and
// the version the count holds for (it grows with any list's).
func (x *lexIndex) unionKey(lists []*term, sc *scratch) (string, uint64) {
	key := make([]byte, 0, 4*len(lists)+4)
	if x.split() {
		t := sc.tenant // the tenant's documents only (tenants.go)
		key = append(key, 'T', byte(t), byte(t>>8), byte(t>>16), byte(t>>24))
	}
	var ver uint64
	for _, tm := range lists {
		id := x.ids[tm.name]
		key = append(key, byte(id), byte(id>>8), byte(id>>16), byte(id>>24))
		ver += uint64(tm.ver)
	}
	return string(key), ver
}

// sizeSeen makes sc.seen a bit set of n documents.
func (sc *scratch) sizeSeen(n int) {
	if words := n/64 + 1; len(sc.seen) < words {
		sc.seen = make([]uint64, words+words/4)
	}
}

// markLive sets the bits of tm's live documents (those keep takes; nil:
// every one) in sc.seen and returns count plus those not set before,
// stopping once that reaches stop (<= 0: never). The words it sets are
// noted, so that clearSeen reads no list.
func (sc *scratch) markLive(tm *term, count, stop int, keep func(rid uint32) bool) int {
	for p := range tm.parts() {
		rids, tfs := tm.part(p, &sc.blk)
		tfs = tfs[:len(rids)]
		for i, rid := range rids {
			if tfs[i] == 0 || keep != nil && !keep(rid) {
				continue
			}
			w, b := rid>>6, uint64(1)<<(rid&63)
			if sc.seen[w]&b != 0 {
				continue
			}
			if sc.seen[w] == 0 {
				sc.seenWords = append(sc.seenWords, w)
			}
			sc.seen[w] |= b
			if count++; count == stop {
				return count
			}
		}
	}
	return count
}

// clearSeen clears the bits markLive set.
func (sc *scratch) clearSeen() {
	for _, w := range sc.seenWords {
		sc.seen[w] = 0
	}
	sc.seenWords = sc.seenWords[:0]
}

// dfCache holds the union counts of stem groups, each with the sum of its
// terms' versions when counted (versions only grow: an equal sum means no
// term changed). Searches share it under their read lock, hence its own.
type dfCache struct {
	mu sync.RWMutex // every search reads it for each group; writes are the merges
	m  map[string]cachedDF
}

type cachedDF struct {
	ver uint64
	df  int
}

// dfCacheMax bounds the cache (it is emptied when full).
const dfCacheMax = 1 << 14

func (c *dfCache) get(key string, ver uint64) (int, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
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
