package vecindex

import (
	"fmt"
	"testing"
)

// FuzzOps drives an index through a sequence of adds, replacements,
// removals and searches decoded from the input, checking it against a plain
// map: Len matches, every hit is live and accepted, hits are sorted and
// there are min(k, live accepted) of them, and the graph invariants hold.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 200, 201, 100, 101, 102})
	f.Add([]byte("add remove search replace all the things, many times over and over"))
	seq := make([]byte, 600)
	for i := range seq {
		seq[i] = byte(i * 37)
	}
	f.Add(seq)
	f.Fuzz(func(t *testing.T, ops []byte) {
		const dim = 4
		ix := New(dim, WithSeed(1), WithExactThreshold(1), WithM(4))
		ref := map[string]bool{}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%8, ops[i+1]
			id := fmt.Sprintf("id%d", arg%97)
			vec := []float32{float32(arg%7) - 3, float32(arg%5) - 2, float32(op) - 4, float32(i%11) + 1}
			switch op {
			case 0, 1, 2, 3:
				if err := ix.Add(id, vec); err != nil {
					t.Fatal(err)
				}
				ref[id] = true
			case 4, 5:
				ix.Remove(id)
				delete(ref, id)
			default:
				k := int(arg%5) + 1
				even := func(s string) bool { return len(s)%2 == 0 }
				var accept func(string) bool
				want := len(ref)
				if op == 7 {
					accept = even
					want = 0
					for id := range ref {
						if even(id) {
							want++
						}
					}
				}
				hits := ix.Search(vec, k, accept)
				if len(hits) != min(k, want) {
					t.Fatalf("op %d: %d hits, want %d", i, len(hits), min(k, want))
				}
				for j, h := range hits {
					if !ref[h.ID] || (accept != nil && !accept(h.ID)) {
						t.Fatalf("op %d: hit %s not live or not accepted", i, h.ID)
					}
					if j > 0 && hits[j-1].Score < h.Score {
						t.Fatalf("op %d: hits not sorted", i)
					}
				}
			}
			if ix.Len() != len(ref) {
				t.Fatalf("op %d: Len %d, want %d", i, ix.Len(), len(ref))
			}
		}
		checkGraph(t, ix)
	})
}
