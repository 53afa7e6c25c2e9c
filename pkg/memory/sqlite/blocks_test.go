package sqlite

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBlocksKeepEveryPosting: a list written in rid order and out of it,
// with removals, re-indexed documents (a stale and a live posting of one
// rid), rids and tfs of every width (gaps of 0 to 2^32-1, tfs to 65,535),
// merged tails and compactions, holds exactly the postings written: read
// in full, its sorted part in rid order, and looked up for random
// candidates by seeking (blocks decoded) and by reading, the same as a
// plain model.
func TestBlocksKeepEveryPosting(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 128))
	for round := range 40 {
		var tm term
		pack := round%4 != 3 // plain lists too, and (below) lists packed part of the time
		var model []posting  // every posting written, tf 0 once killed
		live := map[uint32]int{}
		spread := []uint32{1, 3, 1000, math.MaxUint32 / 4096, math.MaxUint32}[round%5]
		next := uint32(rng.IntN(10))
		rid := func() uint32 {
			if rng.IntN(4) == 0 && len(model) > 0 { // out of order, or a duplicate
				return model[rng.IntN(len(model))].rid + uint32(rng.IntN(3))
			}
			if spread == math.MaxUint32 { // the widest gaps: rids near 0 and near the top
				return uint32(rng.IntN(2)) * (math.MaxUint32 - uint32(rng.IntN(1<<20)))
			}
			next += uint32(rng.Int64N(int64(spread)))
			return next
		}
		tf := func() uint16 {
			switch rng.IntN(8) {
			case 0:
				return uint16(1 + rng.IntN(math.MaxUint16))
			case 1, 2:
				return uint16(1 + rng.IntN(7))
			}
			return 1
		}
		kill := func(r uint32) {
			if _, ok := live[r]; !ok {
				return
			}
			tm.kill(r)
			for i := range model {
				if model[i].rid == r && model[i].tf != 0 {
					model[i].tf = 0
					break
				}
			}
			delete(live, r)
			tm.stale++
		}
		for op := range 600 + rng.IntN(3000) {
			r := rid()
			if _, ok := live[r]; ok {
				kill(r) // re-indexed: its old posting goes stale first, as setCounts does
			}
			f := tf()
			tm.add(r, f, 10, pack)
			model = append(model, posting{r, f})
			live[r] = len(model) - 1
			if rng.IntN(5) == 0 && len(live) > 0 {
				for k := range live {
					kill(k)
					break
				}
			}
			if op%1499 == 1498 && round%4 == 2 {
				pack = !pack
			}
			if op%997 == 996 {
				ps := slices.DeleteFunc(tm.all(nil), func(p posting) bool { return p.tf == 0 })
				slices.SortStableFunc(ps, byRid)
				tm.setAll(ps, pack)
				tm.stale = 0
				model = slices.DeleteFunc(model, func(p posting) bool { return p.tf == 0 })
			}
		}
		got := tm.all(nil)
		if len(got) != len(model) || tm.count() != len(model) {
			t.Fatalf("round %d: %d postings read (count %d), %d written", round, len(got), tm.count(), len(model))
		}
		sortLive := func(ps []posting) []posting {
			ps = slices.DeleteFunc(slices.Clone(ps), func(p posting) bool { return p.tf == 0 })
			slices.SortFunc(ps, func(a, b posting) int { return cmp.Or(cmp.Compare(a.rid, b.rid), cmp.Compare(a.tf, b.tf)) })
			return ps
		}
		want := sortLive(model)
		if g := sortLive(got); !slices.Equal(g, want) {
			t.Fatalf("round %d: live postings differ from those written", round)
		}
		if !slices.IsSortedFunc(got[:tm.sortedLen()], byRid) {
			t.Fatalf("round %d: the sorted part (%d of %d postings) is not in rid order", round, tm.sortedLen(), len(got))
		}
		if round%4 < 2 && tm.nblocks() == 0 && tm.sortedLen() > blockLen {
			t.Fatalf("round %d: %d sorted postings and no block packed", round, tm.sortedLen())
		}
		if round%4 == 3 && tm.nblocks() > 0 {
			t.Fatalf("round %d: lists not to be packed have %d blocks", round, tm.nblocks())
		}
		// Candidates: a few (seeking) and many (reading); not in the round
		// of rids near 2^32 (a bit set of them all is 512 MB; the widths
		// are TestBlockWidths').
		if spread == math.MaxUint32 {
			continue
		}
		var buf blockBuf
		var top uint32
		for _, p := range model {
			top = max(top, p.rid)
		}
		mark := make([]uint64, (uint64(top)+3)/64+1)
		for _, n := range []int{1, 3, 20, len(want)/2 + 1} {
			set := map[uint32]bool{}
			for range n {
				if rng.IntN(3) == 0 {
					set[uint32(rng.Uint64N(uint64(top)+3))] = true
				} else if len(want) > 0 {
					set[want[rng.IntN(len(want))].rid] = true
				}
			}
			cands := slices.Sorted(func(yield func(uint32) bool) {
				for r := range set {
					if !yield(r) {
						return
					}
				}
			})
			clear(mark)
			for _, r := range cands {
				mark[r>>6] |= 1 << (r & 63)
			}
			var exp []posting
			for _, p := range want {
				if set[p.rid] {
					exp = append(exp, p)
				}
			}
			var lx lexIndex
			if c := sortLive(lx.candidates(&tm, cands, mark, nil, &buf)); !slices.Equal(c, exp) {
				t.Fatalf("round %d, %d candidates (seekable %v): found %v, want %v", round, len(cands), tm.seekable(len(cands)), c, exp)
			}
		}
	}
}

// TestBlockWidths: a block of gaps and tfs of each width decodes as
// written, and a tf cleared in place clears that posting's only.
func TestBlockWidths(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for w := range 33 {
		tw := min(w, 16)
		var tm term
		var rids [blockLen]uint32
		var tfs [blockLen]uint16
		top := uint64(1)<<w - 1
		big := 1 + rng.IntN(blockLen-1) // the gap of width w exactly
		for i := 1; i < blockLen; i++ {
			gap := uint64(0)
			if i == big {
				gap = top
			} else if w > 0 && w < 25 {
				gap = rng.Uint64N(top + 1)
			}
			rids[i] = rids[i-1] + uint32(gap)
		}
		for i := range tfs {
			tfs[i] = uint16(rng.Uint64N(uint64(1) << tw))
		}
		tfs[rng.IntN(blockLen)] = uint16(uint64(1)<<tw - 1)
		tm.pack(rids[:], tfs[:])
		if got := uint(tm.bl.data[0]); got != uint(w) {
			t.Fatalf("width %d: packed at %d bits", w, got)
		}
		var buf blockBuf
		tm.block(0, &buf)
		if buf.rids != rids || buf.tfs != tfs {
			t.Fatalf("width %d: decoded %v %v, wrote %v %v", w, buf.rids, buf.tfs, rids, tfs)
		}
		for _, at := range []int{0, 77, blockLen - 1} {
			tm.clearTF(0, at)
			tfs[at] = 0
			tm.block(0, &buf)
			if buf.rids != rids || buf.tfs != tfs {
				t.Fatalf("width %d: clearing posting %d changed others: %v %v", w, at, buf.rids, buf.tfs)
			}
		}
	}
}

// BenchmarkBlockDecode: decoding a block (gaps of 6 bits, tfs of 2).
func BenchmarkBlockDecode(b *testing.B) {
	var tm term
	var rids [blockLen]uint32
	var tfs [blockLen]uint16
	for i := range blockLen {
		rids[i] = uint32(i * 37)
		tfs[i] = uint16(1 + i%3)
	}
	tm.pack(rids[:], tfs[:])
	var buf blockBuf
	for b.Loop() {
		tm.block(0, &buf)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*blockLen), "ns/posting")
}
