package sqlite

import "slices"

// Removing or re-indexing a document marks its postings stale, one in each
// of its terms' lists, so the index must know its terms. It keeps no list
// of them (the term ids as uvarint deltas took about 1 KB a
// LongMemEval-size memory, a quarter of its heap once the postings were
// packed): a writer has the document's previous version (every write reads
// the row it replaces: change.was), so its terms are derived again from
// that text, and the document's fingerprint (termPrint of its term ids,
// kept at indexing) checks that they are the terms indexed. Without the
// previous text, or should it not match, the document is looked up in
// every list instead (removeScan: correct, slower; counted in scanned).
// An erasure removes its documents in one pass over the lists
// (removeAll).

// termPrint is the fingerprint of a document's distinct term ids (in any
// order): a sum of the ids mixed (splitmix64's finaliser) and their
// count, never 0 (the mark of a document not indexed).
func termPrint(ids []uint32) uint64 {
	sum := uint64(len(ids)) * 0x9e3779b97f4a7c15
	for _, id := range ids {
		z := uint64(id) + 0x9e3779b97f4a7c15
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		sum += z ^ z>>31
	}
	if sum == 0 {
		sum = 1
	}
	return sum
}

// idsOf returns the term ids of counts' terms, false when one is not in
// the dictionary (counts cannot be an indexed document's then).
func (x *lexIndex) idsOf(counts map[string]int, into []uint32) ([]uint32, bool) {
	for t := range counts {
		id, ok := x.ids[t]
		if !ok {
			return into, false
		}
		into = append(into, id)
	}
	return into, true
}

// removeScan marks document rid's postings stale in every list holding
// one, and returns how many.
func (x *lexIndex) removeScan(rid uint32) int {
	n := 0
	t := x.tenantOf(rid)
	for id := range x.tms {
		tm := &x.tms[id]
		if tm.name != "" && tm.df > 0 && tm.kill(rid) {
			if tm.dense {
				x.setDense(tm, rid, 0)
			}
			tm.df--
			tm.stale++
			tm.ver++
			x.countTerm(t, uint32(id), -1)
			n++
		}
	}
	return n
}

// removeAll removes the documents rids (those indexed) in one pass over
// the lists.
func (x *lexIndex) removeAll(rids []uint32) {
	gone := make([]uint64, len(x.docLen)/64+1)
	some := false
	for _, rid := range rids {
		if int(rid) < len(x.docLen) && x.docPrint[rid] != 0 {
			gone[rid>>6] |= 1 << (rid & 63)
			some = true
		}
	}
	if !some {
		return
	}
	killed := 0
	var buf blockBuf
	for id := range x.tms {
		tm := &x.tms[id]
		if tm.name == "" || tm.df == 0 {
			continue
		}
		k := 0
		for b := range tm.nblocks() {
			tm.block(b, &buf)
			for i, rid := range &buf.rids {
				if gone[rid>>6]&(1<<(rid&63)) != 0 && buf.tfs[i] != 0 {
					tm.clearTF(b, i)
					if tm.dense {
						x.setDense(tm, rid, 0)
					}
					x.countTerm(x.tenantOf(rid), uint32(id), -1)
					k++
				}
			}
		}
		for i, rid := range tm.rids {
			if gone[rid>>6]&(1<<(rid&63)) != 0 && tm.tfs[i] != 0 {
				tm.tfs[i] = 0
				if tm.dense {
					x.setDense(tm, rid, 0)
				}
				x.countTerm(x.tenantOf(rid), uint32(id), -1)
				k++
			}
		}
		if k > 0 {
			tm.df -= k
			tm.stale += k
			tm.ver++
			killed += k
		}
	}
	x.dead += killed
	x.live -= killed
	for _, rid := range slices.Compact(slices.Sorted(slices.Values(rids))) {
		if int(rid) < len(x.docLen) && x.docPrint[rid] != 0 {
			x.forget(rid)
		}
	}
}
