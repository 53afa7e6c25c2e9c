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
