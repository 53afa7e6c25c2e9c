package sqlite

// Dense copies of the commonest terms' lists. A term most documents hold
// ("the", "of", "in": over commonShare of them) is scored for candidates
// only (the common terms' rule and pruning, see searchPruned): the
// documents found, looked up in its list. At a million memories in one
// project that list holds hundreds of thousands of postings, and the
// tens of thousands of candidates a question leaves were found by a read
// of the whole list against their bit set, or a binary search each: a
// quarter of the lexical channel's CPU. Such a term also keeps its live
// postings' frequencies by document (2 bytes a document, in rid order),
// where a candidate is one read: from denseMinDocs documents on, for
// denseMax terms at most (a store of long memories has many terms over
// the share; each copy takes 2 MB at a million documents). The copies are
// kept by the index, by term id (a field of every term would cost a
// million unique words 24 MB); the term only says that it has one.
//
// A copy is written where the list is: the posting added (setCounts), a
// posting killed (remove, removeScan, removeAll), the term freed
// (compact): under the index's write lock, so it always holds what the
// list holds (TestDenseCopyIsTheList), and the scores are the same bit
// for bit.

const (
	denseMinDocs = 1 << 16
	denseMax     = 32
)

// setDense records document rid's frequency of tm (0: none) in its copy.
func (x *lexIndex) setDense(tm *term, rid uint32, tf uint16) {
	d := x.dense[tm.id]
	if int(rid) >= len(d) {
		if tf == 0 {
			return
		}
		n := max(int(rid)+1, len(d)+len(d)/8)
		d = append(d, make([]uint16, n-len(d))...)
		x.dense[tm.id] = d
	}
	d[rid] = tf
}

// keepDense gives tm a dense copy, from its live postings, when it is now
// held by over commonShare of the documents (from x.denseMin documents
// on, for denseMax terms at most).
func (x *lexIndex) keepDense(tm *term) {
	if tm.dense || len(x.dense) >= denseMax || x.nDocs < x.denseMin() || float64(tm.df) <= commonShare*float64(x.nDocs) {
		return
	}
	d := make([]uint16, len(x.docLen))
	var buf blockBuf
	for p := range tm.parts() {
		rids, tfs := tm.part(p, &buf)
		tfs = tfs[:len(rids)]
		for i, rid := range rids {
			if tfs[i] != 0 {
				d[rid] = tfs[i]
			}
		}
	}
	if x.dense == nil {
		x.dense = map[uint32][]uint16{}
	}
	x.dense[tm.id] = d
	tm.dense = true
}

// denseMin is how many documents the index holds before terms are kept
// dense (tests lower it: lexIndex.denseFrom).
func (x *lexIndex) denseMin() int {
	if x.denseFrom > 0 {
		return x.denseFrom
	}
	return denseMinDocs
}
