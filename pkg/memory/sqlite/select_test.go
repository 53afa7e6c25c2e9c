package sqlite

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFillBestIsFillThenBestFrom: the one-pass selection (fillBest) keeps
// the documents that a histogram of all the scores and a second pass from
// its cut keep, in the same order, and counts the same histogram: on
// scores with ties by the thousand (the bench's common words), spread
// out, all equal, fewer documents than asked for, and asks from 1 to more
// than there are documents.
func TestFillBestIsFillThenBestFrom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	shapes := map[string]func() float32{
		"ties":   func() float32 { return float32(1 + rng.IntN(12)) },
		"spread": func() float32 { return rng.Float32()*10 + 0.001 },
		"equal":  func() float32 { return 2.5 },
		"skewed": func() float32 { return float32(1 / (rng.Float64() + 0.0001)) },
	}
	for name, score := range shapes {
		for _, ndocs := range []int{1, 50, 3000, 60000} {
			for _, need := range []int{1, 10, 60, 4000, 100000} {
				t.Run(fmt.Sprintf("%s/%d/%d", name, ndocs, need), func(t *testing.T) {
					var sc scratch
					sc.score = make([]float32, 2*ndocs+1)
					docs := rng.Perm(2 * ndocs)[:ndocs]
					rids := make([]uint32, ndocs)
					var top float32
					for i, d := range docs {
						rids[i] = uint32(d + 1)
						v := score()
						sc.score[rids[i]] = v
						top = max(top, v)
					}
					// The reference: a histogram of all, then the documents
					// from its cut (the two passes fillBest replaces).
					var want histogram
					want.scale = float32(cutBuckets-1) / top
					for _, rid := range rids {
						want.counts[want.bucket(sc.score[rid])]++
					}
					wantCut := max(0, want.cutFor(need))
					wantBest := slices.Clone(sc.bestFrom(rids, &want, wantCut))

					var h histogram
					got, cut := sc.fillBest(rids, &h, top, need)
					if cut != wantCut || h != want {
						t.Fatalf("cut %d, want %d; histograms equal: %v", cut, wantCut, h == want)
					}
					if !slices.Equal(got, wantBest) {
						t.Fatalf("%d kept, want %d (first %v, want %v)", len(got), len(wantBest), got[:min(3, len(got))], wantBest[:min(3, len(wantBest))])
					}
					if !slices.IsSortedFunc(got, bestFirst) || len(got) < min(need, ndocs) {
						t.Fatalf("%d kept of %d, need %d", len(got), ndocs, need)
					}
				})
			}
		}
	}
}

// TestBestFirstFindsTheBest: visitBest and bestAccepted, whichever way
// they select (a floor judged on a sample, or the histogram when the
// sample misjudges or the filter rejects too many), give what sorting
// every document gives: the want best accepted (ties by id, here the rid)
// for a caller keeping them as the Lexical channel does, and the n best
// accepted scores.
func TestBestFirstFindsTheBest(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var x lexIndex
	for _, shape := range []string{"ties", "spread", "one-high", "periodic"} {
		for _, ndocs := range []int{100, 2000, 50000} {
			for _, keep := range []int{1, 2, 40} { // the filter takes 1 in keep
				t.Run(fmt.Sprintf("%s/%d/%d", shape, ndocs, keep), func(t *testing.T) {
					var sc scratch
					sc.score = make([]float32, ndocs+1)
					var top float32
					for rid := 1; rid <= ndocs; rid++ {
						v := float32(1 + rng.IntN(20))
						switch shape {
						case "spread":
							v = rng.Float32()*50 + 0.01
						case "one-high":
							if rid != ndocs/2 {
								v = float32(1 + rng.IntN(3))
							} else {
								v = 1000
							}
						case "periodic": // every 16th low: the sample judges the floor from those
							if rid%sampleEvery == 1 {
								v = 0.5
							} else {
								v = 10 + rng.Float32()
							}
						}
						sc.score[rid] = v
						sc.touched = append(sc.touched, uint32(rid))
						top = max(top, v)
					}
					accept := func(rid uint32) bool { return rid%uint32(keep) == 0 }
					var want []ranked
					for _, rid := range sc.touched {
						if accept(rid) {
							want = append(want, ranked{sc.score[rid], rid})
						}
					}
					slices.SortFunc(want, byScoreThenRid)
					const k = 60
					want = want[:min(k, len(want))]

					if got := x.bestAccepted(&sc, sc.touched, top, k, accept); len(got) != len(want) {
						t.Fatalf("bestAccepted: %d, want %d", len(got), len(want))
					} else {
						for i := range got {
							if got[i].score != want[i].score {
								t.Fatalf("bestAccepted %d: %v, want %v", i, got[i].score, want[i].score)
							}
						}
					}

					var kept []ranked // the caller: the k best accepted, ties by rid
					visit := func(rid uint32, v float64) bool {
						if len(kept) == k {
							last := kept[k-1]
							if float32(v) < last.score {
								return false
							}
							if float32(v) == last.score && rid > last.rid {
								return true
							}
						}
						if accept(rid) {
							kept = append(kept, ranked{float32(v), rid})
							slices.SortFunc(kept, byScoreThenRid)
							kept = kept[:min(k, len(kept))]
						}
						return true
					}
					touched := slices.Clone(sc.touched)
					x.visitBest(&sc, top, k, func() bool { return len(kept) < k }, visit, false)
					if !slices.Equal(kept, want) {
						t.Fatalf("visitBest kept %d, want %d (first %v, want %v)", len(kept), len(want), kept[:min(3, len(kept))], want[:min(3, len(want))])
					}
					for _, rid := range touched {
						if sc.score[rid] != 0 {
							t.Fatalf("score of %d left %v", rid, sc.score[rid])
						}
					}
				})
			}
		}
	}
}

// TestAboveCutsAMisjudgedFloor: when every document the sample reads
// scores low, the floor is under nearly all of them, and above keeps only
// those from a histogram's cut of them (not all, to be sorted), best
// first; TestBestFirstFindsTheBest's "periodic" shape checks the callers'
// answers.
func TestAboveCutsAMisjudgedFloor(t *testing.T) {
	const n, want = 50000, 60
	var sc scratch
	sc.score = make([]float32, n+1)
	docs := make([]uint32, n)
	var top float32
	for i := range docs {
		rid := uint32(i + 1)
		docs[i] = rid
		sc.score[rid] = 10 + float32(i%97)/100
		if i%sampleEvery == 0 {
			sc.score[rid] = 0.5
		}
		top = max(top, sc.score[rid])
	}
	floor := sc.floorFor(docs, top, want)
	if floor <= 0 || floor > 1 {
		t.Fatalf("floor %v: the test needs one the sample misjudged", floor)
	}
	var h histogram
	got, cut := sc.above(docs, floor, top, want, &h)
	if cut == 0 || len(got) < want || len(got) > n/10 {
		t.Fatalf("above kept %d of %d documents (cut %d)", len(got), n, cut)
	}
	if !slices.IsSortedFunc(got, bestFirst) || got[0].score != top {
		t.Fatalf("not the best first: %v", got[:3])
	}
	for _, rid := range docs {
		if v := sc.score[rid]; v >= got[want-1].score && h.bucket(v) < cut {
			t.Fatalf("document %d (%v) as good as the %d-th kept (%v) left under the cut", rid, v, want, got[want-1].score)
		}
	}
	if got, cut := sc.above(docs, 10.9, top, want, &histogram{}); len(got) == 0 || cut != 0 {
		t.Fatalf("above a sound floor kept %d, cut %d", len(got), cut)
	}
}

// byScoreThenRid orders by score, best first, ties by rid: the order of the
// test's caller, which breaks ties on the rid as the channel does on the id.
func byScoreThenRid(a, b ranked) int {
	if c := bestFirst(a, b); c != 0 {
		return c
	}
	return cmp.Compare(a.rid, b.rid)
}
