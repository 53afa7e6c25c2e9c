package sqlite

// visibleShare: a lexical search whose filter sees at most this share of
// the store's documents (the scope sets' count: its project, its tenant's
// global memories and, across projects, the tenant's memories of reach
// anywhere) scores those documents only (searchVisible) instead of every
// document its terms' lists hold.
const visibleShare = 0.25

// visiblePostings: searchVisible is taken only for a query whose lists
// hold more than this many postings a visible document (marking the
// documents and merging their lists costs about what reading as many
// postings does; a query of rare terms reads its short lists whole).
const visiblePostings = 2

// postingsOf is how many live postings the query's units hold (a
// group's summed over its lists), every tenant's: what reading them costs.
func (x *lexIndex) postingsOf(words []string, t uint32) int {
	n := 0
	for _, u := range x.units(words, t) {
		for _, tm := range u.lists {
			n += tm.df
		}
	}
	return n
}

// searchVisible is search for a filter that sees the documents vis
// (sorted rids, set in sc.mark by the caller; a superset of those it
// accepts) and few of the store's: each unit's postings are read for those
// documents only (looked up in the lists when they are few against a list,
// by a pass over it against their bit set otherwise), so that a project of
// a thousand memories in a store of a million costs about what its own
// postings cost, not the store's. The scores are search's (the tenant's
// statistics, the same units in the same order, the common words' rule
// decided on the same counts: TestSearchVisibleMatches).
func (x *lexIndex) searchVisible(words []string, sc *scratch, want int, vis []uint32, more func() bool, visit func(rid uint32, score float64) bool) (left bool) {
	if x.nDocs == 0 || len(vis) == 0 {
		return false
	}
	N, idf, bm := x.prepare(sc)
	if N == 0 {
		return false // the tenant has no document
	}
	us := x.units(words, sc.tenant)
	sc.touched = sc.touched[:0]
	var top float32
	add := func(rid uint32, k, f float64) {
		if v := sc.add(rid, bm.score(k, f, x.docLen[rid])); v > top {
			top = v
		}
	}
	common := false
	for i, u := range us {
		// The rule counts the documents the rarer units found in the whole
		// index, as search does (touchedAtLeast reads their lists until it
		// has counted 2 x want, or finds one that long): counted among the
		// visible documents only, it left the common words in more often,
		// which changed the answers (LongMemEval-dev R@10 0.900 -> 0.897).
		if !common && want > 0 && float64(u.df) > commonShare*N && x.touchedAtLeast(sc, us[:i], true, 2*want) {
			common = true // units are sorted by df: so are the rest
		}
		if common {
			// As search: a common group is left out, a common word's own
			// token counts for the documents found only.
			tm, w, ok := u.commonToken()
			if !ok {
				continue
			}
			df := x.dfOf(tm, sc.tenant)
			if df == 0 {
				continue
			}
			k := w * idf(float64(df)) * (bm25K1 + 1)
			sc.found = x.candidates(tm, vis, sc.mark, sc.found[:0], &sc.blk)
			for _, p := range sc.found {
				if sc.score[p.rid] != 0 {
					add(p.rid, k, float64(p.tf))
				}
			}
			continue
		}
		// The unit's idf is the tenant's: its documents in every project
		// (a group's from the union of its lists, cached).
		df := x.unionDF(u.lists, sc)
		if df == 0 {
			continue
		}
		k := (u.w + u.we) * idf(float64(df)) * (bm25K1 + 1)
		if len(u.lists) == 1 {
			sc.found = x.candidates(u.lists[0], vis, sc.mark, sc.found[:0], &sc.blk)
			for _, p := range sc.found {
				add(p.rid, k, float64(p.tf))
			}
			continue
		}
		x.accumulateGroup(sc, u.lists, vis)
		for _, rid := range sc.touchT {
			f := float64(sc.tf[rid])
			sc.tf[rid] = 0
			add(rid, k, f)
		}
	}
	x.visitBest(sc, top, want, more, visit, false)
	return common
}

// add adds s to rid's score, noting rid among the touched documents the
// first time, and returns the new score.
func (sc *scratch) add(rid uint32, s float32) float32 {
	old := sc.score[rid]
	if old == 0 {
		sc.touched = append(sc.touched, rid)
	}
	v := old + s
	sc.score[rid] = v
	return v
}

// markVisible sets the bits of vis (sorted) in sc.mark (sized for n rids
// at least) and returns vis.
func (sc *scratch) markVisible(vis []uint32, n int) []uint32 {
	if len(vis) > 0 {
		n = max(n, int(vis[len(vis)-1])+1)
	}
	if words := n/64 + 1; len(sc.mark) < words {
		sc.mark = make([]uint64, words+words/4)
	}
	for _, rid := range vis {
		sc.mark[rid>>6] |= 1 << (rid & 63)
	}
	return vis
}

// unmarkVisible clears the bits markVisible set.
func (sc *scratch) unmarkVisible() {
	for _, rid := range sc.vis {
		sc.mark[rid>>6] = 0
	}
}
