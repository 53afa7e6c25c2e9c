package redis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
)

// sortBest must put exactly what a full sort puts first, in the same order,
// including ties of score broken by id.
func TestSortBestMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for trial := range 300 {
		n := rng.IntN(400)
		all := make([]memory.Scored, n)
		for i := range all {
			// Few distinct scores: many ties, as BM25 gives.
			all[i] = memory.Scored{ID: fmt.Sprintf("n%04d", rng.IntN(100000)), Score: float64(rng.IntN(12))}
			all[i].ID += fmt.Sprint(i) // unique ids
		}
		want := slices.Clone(all)
		sortScored(want)
		k := rng.IntN(n + 3)
		got := slices.Clone(all)
		sortBest(got, k)
		m := min(k, n)
		if !slices.Equal(got[:m], want[:m]) {
			t.Fatalf("trial %d (n %d, k %d): best %v, want %v", trial, n, k, got[:m], want[:m])
		}
		rest := slices.Clone(got[m:])
		sortScored(rest)
		if !slices.Equal(rest, want[m:]) {
			t.Fatalf("trial %d (n %d, k %d): the rest is not the other elements", trial, n, k)
		}
	}
}
