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
					if !slices.IsSortedFunc(got, func(a, b ranked) int { return cmp.Compare(b.score, a.score) }) || len(got) < min(need, ndocs) {
						t.Fatalf("%d kept of %d, need %d", len(got), ndocs, need)
					}
				})
			}
		}
	}
}
