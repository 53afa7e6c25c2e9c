package sqlite

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
)

// Dynamic pruning of the lexical channel (MaxScore, Turtle and Flood
// 1995, in its term-at-a-time form). The query's units are scored rarest
// first, as before; before each, the most the units left can add to one
// document is summed from their bounds (bound). When the want-th best
// accepted score found so far beats that sum, no document that only the
// units left hold can enter the want best, and of the documents found
// only those within that sum of the want-th best can still change places:
// from there on the units left are scored for those candidates only, each
// looked up in the rid-ordered posting lists by binary search (postings.go).
// The common terms' rule (commonShare) was already such a cut, with the
// common words' own bound; both now restrict the same candidate set.
//
// The want best accepted documents and their scores are those of scoring
// every unit in full, bit for bit (the same float32 sums in the same unit
// order): TestPrunedSearchMatchesExhaustive compares them on random
// corpora, queries, filters and churn. What pruning changes is which
// documents below them are visited, and that the caller's stop signal comes
// sooner.

// pruneSlack is the relative margin the pruning tests leave for float32
// rounding (a score is a float32 sum of a few float32 terms).
const pruneSlack = 1e-5

// pruneSample is how many of the best documents found (times want)
// worthPruning scores in full.
const pruneSample = 2

// pruneShare: a search tries to prune before a unit when the postings of
// the units left outnumber the documents found this many times.
const pruneShare = 4

// finishFound scores the units from i of us (those before it scored in
// full, sc.touched the documents they found, at least want) for the
// documents found only, and reports whether that is the answer: whether
// the want-th best accepted document scores more than all that the units
// left could add to a document none of the units before held (done;
// worthPruning tells beforehand). The
// documents found are looked up in the units' lists (binary search or a
// read against their bit set, see candidates), rarest unit first; after
// each unit (while the units left have more postings than there are
// documents), those that cannot reach the want-th best score so far with
// all that the units left can add are dropped. common is the common terms'
// rule as search applies it (decided at the first unit over commonShare
// of the documents, on the documents the units before it hold).
//
// When not done, the caller scores every unit afresh; the work here is
// lost (worthPruning makes that the exception).
func (x *lexIndex) finishFound(sc *scratch, us []lexUnit, restDF []int, i, want int, accept func(uint32) bool, idf func(float64) float64, bm bm25, N float64, top *float32) (done, common bool) {
	if words := len(x.docLen)/64 + 1; len(sc.mark) < words {
		sc.mark = make([]uint64, words+words/4)
	}
	for _, rid := range sc.touched {
		sc.mark[rid>>6] |= 1 << (rid & 63)
	}
	sc.candsFromMarks()
	// reach: the most units j.. add to a document, the common ones as
	// the rule weighs them once it is on.
	reach := func(j int, commonOn bool) float64 {
		r := 0.0
		for ; j < len(us); j++ {
			u := &us[j]
			if commonOn && float64(u.df) > commonShare*N {
				if w := u.commonWeight(); w > 0 {
					r += x.bound(u.lists[:1], w, idf, bm, sc.tenant)
				}
				continue
			}
			r += x.bound(u.lists, u.w+u.we, idf, bm, sc.tenant)
		}
		return r
	}
	// Those that cannot reach the want-th best found with all the units
	// left add are out from the start.
	if kth := x.kthOf(sc, sc.cands, *top, want, accept); kth > 0 {
		sc.keepWithin(kth, reach(i, x.ofTenant(sc.touched, sc.tenant) >= 2*want))
	}
	// The most the units add to a document none found: only a unit not
	// common brings one in, and the common ones then count for it.
	newDocs, newCommon := 0.0, 0.0
	for j := i; j < len(us); j++ {
		u := &us[j]
		if !common && float64(u.df) > commonShare*N && x.touchedAtLeast(sc, us[:j], true, 2*want) {
			common = true
		}
		lists, w, df := u.lists, u.w+u.we, 0
		if common {
			if w = u.commonWeight(); w == 0 {
				continue
			}
			lists = lists[:1]
			df = x.dfOf(lists[0], sc.tenant)
			newCommon += x.bound(lists, w, idf, bm, sc.tenant)
		} else {
			df = x.unionDF(lists, sc)
			newDocs += x.bound(lists, w, idf, bm, sc.tenant)
		}
		if df > 0 {
			k := w * idf(float64(df)) * (bm25K1 + 1)
			if len(lists) == 1 {
				// One list: a document's one live posting is its tf.
				sc.found = x.candidates(lists[0], sc.cands, sc.mark, sc.found[:0], &sc.blk)
				for _, p := range sc.found {
					v := sc.score[p.rid] + bm.score(k, float64(p.tf), x.docLen[p.rid])
					sc.score[p.rid] = v
					if v > *top {
						*top = v
					}
				}
			} else {
				x.accumulateGroup(sc, lists, sc.cands)
				for _, rid := range sc.touchT {
					f := float64(sc.tf[rid])
					sc.tf[rid] = 0
					v := sc.score[rid] + bm.score(k, f, x.docLen[rid])
					sc.score[rid] = v
					if v > *top {
						*top = v
					}
				}
			}
		}
		if j+1 < len(us) && restDF[j+1] > len(sc.cands) {
			// Scores only grow: the want-th best so far is a floor of the
			// want-th best at the end.
			if kth := x.kthOf(sc, sc.cands, *top, want, accept); kth > 0 {
				sc.keepWithin(kth, reach(j+1, common))
			}
		}
	}
	if newDocs == 0 {
		return true, common
	}
	kth := x.kthOf(sc, sc.cands, *top, want, accept)
	return float64(kth) > (newDocs+newCommon)*(1+pruneSlack)+pruneSlack, common
}

// kthOf is the want-th best score of the documents in rids that accept
// takes (nil: every one); -1 when fewer are accepted (see bestAccepted).
func (x *lexIndex) kthOf(sc *scratch, rids []uint32, top float32, want int, accept func(uint32) bool) float32 {
	best := x.bestAccepted(sc, rids, top, want, accept)
	if len(best) < want {
		return -1
	}
	return best[want-1].score
}

// keepWithin drops from sc.cands (and their bits from sc.mark) the
// documents that cannot reach cut with reach more (pruneSlack to spare).
func (sc *scratch) keepWithin(cut float32, reach float64) {
	need := float64(cut) - reach*(1+pruneSlack) - pruneSlack*float64(cut)
	kept := sc.cands[:0]
	for _, rid := range sc.cands {
		if float64(sc.score[rid]) >= need {
			kept = append(kept, rid)
		} else {
			sc.mark[rid>>6] &^= 1 << (rid & 63)
		}
	}
	sc.cands = kept
}

// worthPruning tells whether finishFound will be done before unit i of
// us: it scores the pruneSample x want best accepted documents found so
// far in full (the units left looked up for them; one over commonShare
// counts 0 unless the rule is known: at least what it adds), and their
// want-th best, a floor of the want-th best at the end, must beat the
// most the units left can add to a document not found yet. A search that
// cannot prune pays for this sample only, not for finishFound's work.
func (x *lexIndex) worthPruning(sc *scratch, us []lexUnit, i, want int, accept func(uint32) bool, idf func(float64) float64, bm bm25, N float64, top float32) bool {
	commonKnown := x.ofTenant(sc.touched, sc.tenant) >= 2*want
	isCommon := func(u *lexUnit) bool { return float64(u.df) > commonShare*N }
	reach := 0.0
	for j := i; j < len(us); j++ {
		u := &us[j]
		if commonKnown && isCommon(u) {
			if w := u.commonWeight(); w > 0 {
				reach += x.bound(u.lists[:1], w, idf, bm, sc.tenant)
			}
			continue
		}
		reach += x.bound(u.lists, u.w+u.we, idf, bm, sc.tenant)
	}
	sample := x.bestAccepted(sc, sc.touched, top, pruneSample*want, accept)
	if len(sample) < want || float64(sample[0].score) <= reach*(1+pruneSlack) {
		return false // fewer found, or (scores only grow) the best found is short of it
	}
	if words := len(x.docLen)/64 + 1; len(sc.mark) < words {
		sc.mark = make([]uint64, words+words/4)
	}
	slices.SortFunc(sample, func(a, b ranked) int { return cmp.Compare(a.rid, b.rid) })
	rids := make([]uint32, len(sample))
	for k, r := range sample {
		rids[k] = r.rid
		sc.mark[r.rid>>6] |= 1 << (r.rid & 63)
	}
	defer func() {
		for _, rid := range rids {
			sc.mark[rid>>6] &^= 1 << (rid & 63)
		}
	}()
	pos := func(rid uint32) int { k, _ := slices.BinarySearch(rids, rid); return k }
	tfs := make([]float32, len(sample))
	for j := i; j < len(us); j++ {
		u := &us[j]
		lists, w := u.lists, u.w+u.we
		var df int
		if isCommon(u) {
			if !commonKnown {
				continue
			}
			if w = u.commonWeight(); w == 0 {
				continue
			}
			lists = lists[:1]
			df = x.dfOf(lists[0], sc.tenant)
		} else {
			df = x.unionDF(lists, sc)
		}
		if df == 0 {
			continue
		}
		k := w * idf(float64(df)) * (bm25K1 + 1)
		for _, tm := range lists {
			sc.found = x.candidates(tm, rids, sc.mark, sc.found[:0], &sc.blk)
			for _, p := range sc.found {
				tfs[pos(p.rid)] += float32(p.tf)
			}
		}
		for p, f := range tfs {
			if f != 0 {
				sample[p].score += bm.score(k, float64(f), x.docLen[rids[p]])
				tfs[p] = 0
			}
		}
	}
	slices.SortFunc(sample, bestFirst)
	return float64(sample[want-1].score) > reach*(1+pruneSlack)+pruneSlack
}

// commonWeight is what a unit weighs once the common terms' rule leaves
// groups out: a group only its word's own token (0: none), a word all of
// its weight.
func (u *lexUnit) commonWeight() float64 {
	if u.group {
		return u.we
	}
	return u.w
}

// bound is the most a unit of lists, at weight w, adds to one document's
// score: w x idf x (k1 + 1) x tf / (tf + norm), with the idf of the
// largest list's document frequency (the unit's, the union's, is at least
// that), tf the lists' highest term frequencies summed and norm that of
// their shortest document; frequencies are tenant t's (tenants.go), tf and
// length bounds the store's (bounds all the same).
func (x *lexIndex) bound(lists []*term, w float64, idf func(float64) float64, bm bm25, t uint32) float64 {
	maxDF := 0
	var tf float64
	minLen := uint32(math.MaxUint32)
	for _, tm := range lists {
		df := x.dfOf(tm, t)
		if df == 0 {
			continue
		}
		maxDF = max(maxDF, df)
		tf += float64(tm.maxTF)
		minLen = min(minLen, tm.minLen)
	}
	if maxDF == 0 {
		return 0
	}
	k := w * idf(float64(maxDF)) * (bm25K1 + 1)
	return k * tf / (tf + bm.c1 + bm.c2*float64(minLen))
}

// kthAccepted is the want-th best score among the touched documents that
// accept takes (nil: every one); -1 when fewer are accepted (or fewer
// than want among the 8^3 x want best).
func (x *lexIndex) kthAccepted(sc *scratch, top float32, want int, accept func(uint32) bool) float32 {
	return x.kthOf(sc, sc.touched, top, want, accept)
}

// bestAccepted returns the n best documents of docs that accept takes
// (nil: every one), best first: those over a floor judged on a sample of
// docs (floorFor) when n of them are accepted; otherwise found with a
// histogram of the scores (top: the best), and then fewer when fewer are
// accepted, or none when fewer than n are among the 8^3 x n best.
func (x *lexIndex) bestAccepted(sc *scratch, docs []uint32, top float32, n int, accept func(uint32) bool) []ranked {
	if !(top > 0) {
		return nil
	}
	if floor := sc.floorFor(docs, top, n); floor > 0 {
		var h histogram
		best, _ := sc.above(docs, floor, top, n, &h)
		var out []ranked
		for _, r := range best {
			if accept == nil || accept(r.rid) {
				if out = append(out, r); len(out) == n {
					return out
				}
			}
		}
	}
	var h histogram
	best, _ := sc.fillBest(docs, &h, top, n)
	for need := n; need <= 512*n; need *= 8 {
		cut := h.cutFor(need)
		all := cut < 0 // fewer than need in all: read them all
		if need > n {
			best = sc.bestFrom(docs, &h, max(cut, 0))
		}
		var out []ranked
		for _, r := range best {
			if accept == nil || accept(r.rid) {
				if out = append(out, r); len(out) == n {
					return out
				}
			}
		}
		if all {
			return out
		}
	}
	return nil
}

// restrict makes the touched documents whose score plus reach can still
// come to cut (with pruneSlack to spare) the candidates: in sc.cands, in
// rid order, and set in sc.mark (n: the documents' rid space).
func (sc *scratch) restrict(n int, cut float32, reach float64) {
	if words := n/64 + 1; len(sc.mark) < words {
		sc.mark = make([]uint64, words+words/4)
	}
	need := float64(cut) - reach*(1+pruneSlack) - pruneSlack*float64(cut)
	// Without a branch on the comparison: on the common words' cut a
	// touched document passes about as often as not, and the mispredicted
	// branch was most of the loop's time.
	for _, rid := range sc.touched {
		var in uint64
		if float64(sc.score[rid]) >= need {
			in = 1
		}
		sc.mark[rid>>6] |= in << (rid & 63)
	}
	sc.candsFromMarks()
}

// candsFromMarks sets sc.cands to the documents set in sc.mark, in rid
// order: reading the bit set (16 KB at a million documents) is cheaper
// than sorting more than a few thousand.
func (sc *scratch) candsFromMarks() {
	sc.cands = sc.cands[:0]
	for w, bits := range sc.mark {
		for bits != 0 {
			b := bits & -bits
			sc.cands = append(sc.cands, uint32(w<<6|bitIndex(b)))
			bits &^= b
		}
	}
}

func bitIndex(b uint64) int { return bits.TrailingZeros64(b) }

// touchedAtLeast reports whether the units done matched at least need
// documents: the touched count, unless a pruned search left some of their
// documents untouched (restricted): then counted over their lists, up to
// need.
func (x *lexIndex) touchedAtLeast(sc *scratch, done []lexUnit, restricted bool, need int) bool {
	if found := x.ofTenant(sc.touched, sc.tenant); found >= need || !restricted {
		return found >= need
	}
	for _, u := range done {
		for _, tm := range u.lists {
			if x.dfOf(tm, sc.tenant) >= need {
				return true
			}
		}
	}
	sc.sizeSeen(len(x.docLen))
	defer sc.clearSeen()
	count := 0
	keep := x.keepTenant(sc.tenant)
	for _, u := range done {
		for _, tm := range u.lists {
			if count = sc.markLive(tm, count, need, keep); count >= need {
				return true
			}
		}
	}
	return false
}
