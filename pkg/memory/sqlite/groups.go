package sqlite

import (
	"cmp"
	"slices"
)

// A query term's group (its stem prefix's tokens, see units) is scored on
// the sum of a document's frequencies over the group's lists. Summing them
// in an array indexed by document (sc.tf), then reading it back and
// clearing it, took a third of a turn's CPU at a million memories in one
// project (engram bench inject): three passes over a 4 MB array at
// scattered places, a cache miss each. The lists are kept in rid order
// (postings.go), so the group is merged instead: each list's live postings
// in order (its unsorted tail sorted in), merged smallest first, equal
// documents' frequencies summed. The sums are integers, so the scores are
// the array's bit for bit (TestGroupMergeMatchesScatter).

// merged is a document of a group with its term frequency summed over the
// group's lists.
type merged struct{ rid, tf uint32 }

// mergeGroup returns the live postings of lists in rid order, one per
// document, its frequencies summed (in sc's buffers, reused).
func (x *lexIndex) mergeGroup(lists []*term, sc *scratch) []merged {
	order := append(sc.groupOrder[:0], lists...)
	slices.SortFunc(order, func(a, b *term) int { return cmp.Compare(a.count(), b.count()) })
	defer func() {
		// The pooled scratch must not keep terms (pointers into a term
		// table the index may since have grown, and their lists) alive.
		clear(order)
		sc.groupOrder = order[:0]
	}()
	acc := sc.merged[:0]
	for i, tm := range order {
		run := sc.live(tm)
		if i == 0 {
			acc = append(acc, run...)
			continue
		}
		out := sc.merged2[:0]
		a, b := 0, 0
		for a < len(acc) && b < len(run) {
			switch ra, rb := acc[a].rid, run[b].rid; {
			case ra < rb:
				out = append(out, acc[a])
				a++
			case rb < ra:
				out = append(out, run[b])
				b++
			default:
				out = append(out, merged{ra, acc[a].tf + run[b].tf})
				a++
				b++
			}
		}
		out = append(out, acc[a:]...)
		out = append(out, run[b:]...)
		sc.merged2 = acc[:0]
		acc = out
	}
	sc.merged = acc
	return acc
}

// live returns tm's live postings in rid order (in sc.run, reused): the
// sorted ones as kept, the tail's sorted and merged in.
func (sc *scratch) live(tm *term) []merged {
	out := sc.run[:0]
	for p := range tm.nblocks() {
		rids, tfs := tm.part(p, &sc.blk)
		tfs = tfs[:len(rids)]
		for i, rid := range rids {
			if tfs[i] != 0 {
				out = append(out, merged{rid, uint32(tfs[i])})
			}
		}
	}
	rids, tfs := tm.rids, tm.tfs[:len(tm.rids)]
	for i := range tm.run {
		if tfs[i] != 0 {
			out = append(out, merged{rids[i], uint32(tfs[i])})
		}
	}
	if tm.run < len(rids) {
		tail := sc.tail[:0]
		for i := tm.run; i < len(rids); i++ {
			if tfs[i] != 0 {
				tail = append(tail, merged{rids[i], uint32(tfs[i])})
			}
		}
		slices.SortFunc(tail, func(a, b merged) int { return cmp.Compare(a.rid, b.rid) })
		sc.tail = tail
		if len(tail) > 0 {
			sorted := len(out)
			out = append(out, tail...)
			if sorted > 0 && tail[0].rid < out[sorted-1].rid {
				// Merged in place from the end (out[:sorted] and tail
				// are each in order).
				i, j := sorted-1, len(tail)-1
				for k := len(out) - 1; j >= 0; k-- {
					if i >= 0 && out[i].rid > tail[j].rid {
						out[k] = out[i]
						i--
					} else {
						out[k] = tail[j]
						j--
					}
				}
			}
		}
	}
	sc.run = out
	return out
}

// scoreGroup scores group u (with the search's idf and length
// normalisation) and returns the best score, top at least. When the
// group's document frequency, which its weight needs first, is known (the
// one counted when it was last merged, in x.dfCache while none of its
// lists changed), its largest list is read in place and only the others
// merged (mergeGroup), the merged documents taken in as it passes them:
// the same documents in rid order with the same sums as a merge of all
// (TestScoreGroupIsTheMerge), without a copy of the longest list. Otherwise
// (or when the largest list has an unsorted tail) all its lists are merged
// and the count noted for the next search.
func (x *lexIndex) scoreGroup(sc *scratch, u lexUnit, idf func(float64) float64, bm bm25, top float32) float32 {
	big := 0
	for i, tm := range u.lists {
		if tm.count() > u.lists[big].count() {
			big = i
		}
	}
	tm := u.lists[big]
	var key string
	var ver uint64
	if len(u.lists) > 1 {
		key, ver = x.unionKey(u.lists, sc)
	}
	if tm.run == len(tm.rids) {
		df, ok := x.dfOf(tm, sc.tenant), true
		if len(u.lists) > 1 {
			df, ok = x.dfCache.get(key, ver)
		}
		if ok {
			if df == 0 {
				return top
			}
			k := (u.w + u.we) * idf(float64(df)) * (bm25K1 + 1)
			return x.scoreLists(sc, tm, x.mergeOthers(u.lists, big, sc), 0, k, bm, top)
		}
	}
	ms := x.mergeGroup(u.lists, sc)
	df := countOfTenant(x, ms, func(m merged) uint32 { return m.rid }, sc.tenant)
	if len(u.lists) > 1 {
		x.dfCache.put(key, ver, df) // read in place next time
	}
	if df == 0 {
		return top
	}
	k := (u.w + u.we) * idf(float64(df)) * (bm25K1 + 1)
	for _, m := range ms {
		if v := sc.add(m.rid, bm.score(k, float64(m.tf), x.docLen[m.rid])); v > top {
			top = v
		}
	}
	return top
}

// scorePair scores a word's own token (unit w) and the next unit, its
// stem group g, in one pass when the word's list is the group's largest
// (a word and its family, "validates" beside "validate validates": the
// same long list read twice otherwise). Each document gets the word's
// contribution, then the group's, in the order two passes would add them
// (the units are consecutive), so the scores are the same bit for bit
// (TestScorePairIsTwoPasses). ok is false (nothing done) unless the word
// is one list without stale postings, the group's largest list is that
// list (no unsorted tail) and its count is known (as scoreGroup), and
// neither unit is common (the group would have begun the common words'
// rule; N: the tenant's documents).
func (x *lexIndex) scorePair(sc *scratch, w, g lexUnit, idf func(float64) float64, bm bm25, N float64, top float32) (float32, bool) {
	if w.group || !g.group || len(w.lists) != 1 || len(g.lists) < 2 || float64(g.df) > commonShare*N {
		return top, false
	}
	tm := w.lists[0]
	if tm.stale != 0 || tm.run < len(tm.rids) {
		return top, false
	}
	big := -1
	for i, l := range g.lists {
		if l.count() > tm.count() || l == tm && big >= 0 {
			return top, false // a list larger than the word's, or the word's twice
		}
		if l == tm {
			big = i
		}
	}
	if big < 0 {
		return top, false
	}
	dfW := x.dfOf(tm, sc.tenant)
	dfG, ok := x.dfCache.get(x.unionKey(g.lists, sc))
	if !ok || dfW == 0 || dfG == 0 {
		return top, false
	}
	kW := (w.w + w.we) * idf(float64(dfW)) * (bm25K1 + 1)
	kG := (g.w + g.we) * idf(float64(dfG)) * (bm25K1 + 1)
	x.paired.Add(1)
	return x.scoreLists(sc, tm, x.mergeOthers(g.lists, big, sc), kW, kG, bm, top), true
}

// mergeOthers is mergeGroup of lists but lists[big] (nil when there is
// no other).
func (x *lexIndex) mergeOthers(lists []*term, big int, sc *scratch) []merged {
	if len(lists) < 2 {
		return nil
	}
	others := append(sc.groupRest[:0], lists[:big]...)
	others = append(others, lists[big+1:]...)
	rest := x.mergeGroup(others, sc)
	clear(others) // as mergeGroup's: no term kept alive by the pooled scratch
	sc.groupRest = others[:0]
	return rest
}

// scoreLists scores a group whose largest list tm (in rid order) is read
// in place and whose other lists are merged in rest: each live document
// gets bm25 of the group's tf (tm's and rest's summed) at weight kG, and
// a document of tm, first, bm25 of tm's own tf at weight kW (0: none; see
// scorePair). Documents are scored in rid order. It returns the best
// score, top at least.
func (x *lexIndex) scoreLists(sc *scratch, tm *term, rest []merged, kW, kG float64, bm bm25, top float32) float32 {
	docLen, score := x.docLen, sc.score
	a := 0
	for p := range tm.parts() {
		rids, tfs := tm.part(p, &sc.blk)
		tfs = tfs[:len(rids)]
		for i, rid := range rids {
			tf := uint32(tfs[i])
			if tf == 0 {
				continue // stale
			}
			for ; a < len(rest) && rest[a].rid < rid; a++ {
				if v := sc.add(rest[a].rid, bm.score(kG, float64(rest[a].tf), docLen[rest[a].rid])); v > top {
					top = v
				}
			}
			tfG := tf
			if a < len(rest) && rest[a].rid == rid {
				tfG += rest[a].tf
				a++
			}
			n := docLen[rid]
			var v float32
			if kW == 0 {
				v = sc.add(rid, bm.score(kG, float64(tfG), n))
			} else {
				v = sc.add(rid, bm.score(kW, float64(tf), n)) + bm.score(kG, float64(tfG), n)
				score[rid] = v
			}
			if v > top {
				top = v
			}
		}
	}
	for ; a < len(rest); a++ {
		if v := sc.add(rest[a].rid, bm.score(kG, float64(rest[a].tf), docLen[rest[a].rid])); v > top {
			top = v
		}
	}
	return top
}
