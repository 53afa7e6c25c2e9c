package sqlite

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/engram-memory/engram/pkg/memory/memorytest"
)

// TestGroupMergeMatchesScatter: a group scored by merging its lists
// (mergeGroup) gives every document the score that summing the lists'
// frequencies in an array gave (scatterGroup), bit for bit, on an index
// with churn (re-indexed documents: stale postings and unsorted tails in
// the lists), plain and packed in blocks.
func TestGroupMergeMatchesScatter(t *testing.T) {
	for _, pack := range []bool{false, true} {
		t.Run(fmt.Sprintf("packed=%v", pack), func(t *testing.T) {
			c, x := churnIndex(pack)
			var sc scratch
			search := func(q []string, scatter bool) map[uint32]float64 {
				if scatter {
					x.groupRef = x.scatterGroup
					defer func() { x.groupRef = nil }()
				}
				got := map[uint32]float64{}
				x.search(q, &sc, 0, nil, nil, func(rid uint32, s float64) bool { got[rid] = s; return true })
				return got
			}
			groups, tails, stale := 0, 0, 0
			for range 300 {
				q := c.Query()
				for _, u := range x.units(q, 0) {
					if len(u.lists) < 2 {
						continue
					}
					groups++
					for _, tm := range u.lists {
						if tm.run < len(tm.rids) {
							tails++
						}
						stale += tm.stale
					}
				}
				merged, scattered := search(q, false), search(q, true)
				if len(merged) == 0 || !maps.Equal(merged, scattered) {
					t.Fatalf("query %v: merged %d docs, scattered %d docs, or different scores", q, len(merged), len(scattered))
				}
			}
			t.Logf("%d groups, %d of their lists with a tail, %d stale postings in them", groups, tails, stale)
			if groups == 0 || tails == 0 || stale == 0 {
				t.Fatalf("the queries met %d groups, %d lists with a tail, %d stale postings: the test needs all three", groups, tails, stale)
			}
		})
	}
}

// churnIndex is an index of 5,200 bench corpus documents whose last 1,200
// re-index documents in no order (fewer than would make compact drop the
// stale postings: their new postings go to the lists' tails), one removed,
// plain or packed in blocks; and the corpus, for queries.
func churnIndex(pack bool) (*memorytest.BenchCorpus, *lexIndex) {
	c := memorytest.NewBenchCorpus()
	rng := rand.New(rand.NewPCG(3, 4))
	x := newLexIndex()
	x.forcePack = pack
	for i := range 5200 {
		n := c.Node()
		rid := uint32(i + 1)
		if i >= 4000 {
			rid = uint32(rng.IntN(4000) + 1)
		}
		x.set(rid, docText(&n))
	}
	x.remove(11, nil)
	return c, x
}

// TestScoreGroupIsTheMerge: a group scored with its largest list read in
// place (scoreGroup, once its count is known from a first search) gives
// every document the score the merge gave, bit for bit, and the scatter
// reference's; on an index with churn, plain and packed.
func TestScoreGroupIsTheMerge(t *testing.T) {
	for _, pack := range []bool{false, true} {
		t.Run(fmt.Sprintf("packed=%v", pack), func(t *testing.T) {
			c, x := churnIndex(pack)
			var sc scratch
			search := func(q []string) map[uint32]float64 {
				got := map[uint32]float64{}
				x.search(q, &sc, 0, nil, nil, func(rid uint32, s float64) bool { got[rid] = s; return true })
				return got
			}
			inPlace := 0
			for range 300 {
				q := c.Query()
				x.dfCache = dfCache{}
				accept := func(rid uint32) bool { return rid%3 != 0 }
				mergedTop := topOf(x, &sc, q, 10, accept) // as the channel asks, merged
				x.dfCache = dfCache{}
				merged := search(q) // counts noted
				for _, u := range x.units(q, 0) {
					big := slices.MaxFunc(u.lists, func(a, b *term) int { return cmp.Compare(a.count(), b.count()) })
					if u.group && big.run == len(big.rids) && (len(u.lists) > 1 || big.stale > 0) {
						inPlace++
					}
				}
				read := search(q) // the largest lists read in place
				if top := topOf(x, &sc, q, 10, accept); !slices.Equal(top, mergedTop) {
					t.Fatalf("query %v: the best 10 accepted %v, merged %v", q, top, mergedTop)
				}
				x.groupRef = x.scatterGroup
				scattered := search(q)
				x.groupRef = nil
				if len(merged) == 0 || !maps.Equal(merged, read) || !maps.Equal(merged, scattered) {
					t.Fatalf("query %v: %d, %d and %d docs, or different scores", q, len(merged), len(read), len(scattered))
				}
			}
			if t.Logf("%d groups read in place", inPlace); inPlace == 0 {
				t.Fatal("no group was read in place: the test needs some")
			}
		})
	}
}

// TestLiveMergesTheTail: a list's live postings come out in rid order with
// the tail merged in, stale ones left out.
func TestLiveMergesTheTail(t *testing.T) {
	var tm term
	for _, rid := range []uint32{2, 4, 6, 8} {
		tm.add(rid, 1, 5, false)
	}
	for _, rid := range []uint32{7, 1, 9, 3} {
		tm.add(rid, 2, 5, false) // out of order: the tail
	}
	if tm.run == len(tm.rids) {
		t.Fatal("no tail: the test needs one")
	}
	tm.kill(4)
	var sc scratch
	want := []merged{{1, 2}, {2, 1}, {3, 2}, {6, 1}, {7, 2}, {8, 1}, {9, 2}}
	if got := sc.live(&tm); !slices.Equal(got, want) {
		t.Fatalf("live = %v, want %v", got, want)
	}
}

// scatterGroup scores group unit u in full by summing its lists'
// frequencies in sc.tf: what mergeGroup replaced, the reference it is
// compared with (lexIndex.groupRef). It returns the best score so far.
func (x *lexIndex) scatterGroup(sc *scratch, u lexUnit, idf func(float64) float64, bm bm25, top float32) float32 {
	sc.touchT = sc.touchT[:0]
	for _, tm := range u.lists {
		for p := range tm.parts() {
			rids, tfs := tm.part(p, &sc.blk)
			tfs = tfs[:len(rids)]
			for i, rid := range rids {
				tf := tfs[i]
				if tf == 0 {
					continue // stale
				}
				if sc.tf[rid] == 0 {
					sc.touchT = append(sc.touchT, rid)
				}
				sc.tf[rid] += float32(tf)
			}
		}
	}
	df := float64(x.ofTenant(sc.touchT, sc.tenant))
	if df == 0 {
		for _, rid := range sc.touchT {
			sc.tf[rid] = 0
		}
		return top
	}
	k := (u.w + u.we) * idf(df) * (bm25K1 + 1)
	for _, rid := range sc.touchT {
		f := float64(sc.tf[rid])
		sc.tf[rid] = 0
		if v := sc.add(rid, bm.score(k, f, x.docLen[rid])); v > top {
			top = v
		}
	}
	return top
}

// TestScorePairIsTwoPasses: a word and its stem group scored in one pass
// (scorePair, the word's list the group's largest) give every document
// the scores of two passes, bit for bit, on an index with churn, plain
// and packed, once the groups' counts are known.
func TestScorePairIsTwoPasses(t *testing.T) {
	for _, pack := range []bool{false, true} {
		t.Run(fmt.Sprintf("packed=%v", pack), func(t *testing.T) {
			c, x := churnIndex(pack)
			// Words of their own beside rarer family members, so that
			// the word's list is its group's largest: "alphas" beside
			// "alpha" and "alphabet", some documents holding two of them.
			rng := rand.New(rand.NewPCG(5, 9))
			for i := range 450 { // the family in under a quarter of the documents: not common
				n := c.Node()
				n.Body += " " + []string{"alphas", "alphas alphas", "alphas alpha", "alpha", "alphabet alphas", "alphabet"}[rng.IntN(6)]
				x.set(uint32(6000+i), docText(&n))
			}
			var sc scratch
			search := func(q []string) map[uint32]float64 {
				got := map[uint32]float64{}
				x.search(q, &sc, 0, nil, nil, func(rid uint32, s float64) bool { got[rid] = s; return true })
				return got
			}
			for r := range 300 {
				q := c.Query()
				switch r % 3 {
				case 0:
					q = []string{"alphas"}
				case 1:
					q = append(q, "alphas")
				}
				search(q) // the groups' counts noted
				x.noPair = true
				apart := search(q)
				// As the channel asks (the best 10 accepted, pruned, the
				// common words' rule), under a filter taking 1 in 3.
				accept := func(rid uint32) bool { return rid%3 != 0 }
				apartTop := topOf(x, &sc, q, 10, accept)
				x.noPair = false
				together := search(q)
				if len(apart) == 0 || !maps.Equal(apart, together) {
					t.Fatalf("query %v: %d and %d docs, or different scores", q, len(apart), len(together))
				}
				if top := topOf(x, &sc, q, 10, accept); !slices.Equal(top, apartTop) {
					t.Fatalf("query %v: the best 10 accepted %v, in two passes %v", q, top, apartTop)
				}
			}
			if t.Logf("%d words scored with their group", x.paired.Load()); x.paired.Load() == 0 {
				t.Fatal("no word was scored with its group: the test needs some")
			}
		})
	}
}
