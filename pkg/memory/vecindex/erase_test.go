package vecindex

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestEraseLeavesNoTrace: erased vectors are never returned, the graph
// still finds the others, and no slot of the index's memory holds an
// erased vector (or its code) any more, where Remove keeps them as
// tombstones until a cleanup.
func TestEraseLeavesNoTrace(t *testing.T) {
	for _, n := range []int{50, 3000} { // exact scan and graph walk
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(n)))
			const dim = 16
			ix := New(dim, WithSeed(3), WithExactThreshold(100))
			vecs := make([][]float32, n)
			ids := make([]string, n)
			for i := range vecs {
				vecs[i], ids[i] = randVec(r, dim), fmt.Sprintf("n%d", i)
			}
			if err := ix.AddBatch(ids, vecs); err != nil {
				t.Fatal(err)
			}
			erased := map[string]bool{}
			var gone []string
			for i := 0; i < n; i += 3 {
				gone = append(gone, ids[i])
				erased[ids[i]] = true
			}
			// One removed the ordinary way stays a tombstone (the control).
			ix.Remove(ids[1])
			if got := ix.Erase(append(gone, "unknown")...); got != len(gone) {
				t.Fatalf("Erase removed %d, want %d", got, len(gone))
			}
			if ix.Len() != n-len(gone)-1 {
				t.Fatalf("Len %d, want %d", ix.Len(), n-len(gone)-1)
			}
			for i := 0; i < 20; i++ {
				for _, h := range ix.Search(vecs[r.IntN(n)], 10, nil) {
					if erased[h.ID] || h.ID == ids[1] {
						t.Fatalf("search returned removed %s", h.ID)
					}
				}
			}
			// The nearest neighbour of a kept vector is itself.
			if h := ix.Search(vecs[2], 1, nil); len(h) != 1 || h[0].ID != ids[2] {
				t.Fatalf("search of a kept vector: %v", h)
			}
			ix.mu.RLock()
			defer ix.mu.RUnlock()
			for id := range erased {
				if _, ok := ix.byID[id]; ok {
					t.Fatalf("%s still indexed", id)
				}
			}
			for s := range ix.nodes {
				if ix.state[s] != slotLive {
					for _, x := range ix.vec(uint32(s)) {
						if x != 0 {
							t.Fatalf("slot %d (%v) still holds a vector", s, ix.state[s])
						}
					}
					for _, c := range ix.code(uint32(s)) {
						if c != 0 {
							t.Fatalf("slot %d still holds a code", s)
						}
					}
				}
			}
		})
	}
}
