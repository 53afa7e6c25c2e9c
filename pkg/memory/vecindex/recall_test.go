package vecindex

import "testing"

// recallAt measures mean recall@k of ix against exact search over the
// queries, failing if a hit breaks the filter or too few hits come back.
func recallAt(t testing.TB, ix *Index, names []string, vecs, queries [][]float32, k int, accept func(string) bool) float64 {
	t.Helper()
	var hit, total int
	units := make([][]float32, len(vecs))
	for i, v := range vecs {
		units[i] = make([]float32, len(v))
		normalize(units[i], v)
	}
	for _, q := range queries {
		want := bruteForceUnits(names, units, q, k, accept)
		got := ix.Search(q, k, accept)
		if len(got) != len(want) {
			t.Fatalf("got %d hits, want %d", len(got), len(want))
		}
		set := make(map[string]bool, len(want))
		for _, h := range want {
			set[h.ID] = true
		}
		for _, h := range got {
			if accept != nil && !accept(h.ID) {
				t.Fatalf("hit %s was rejected by the filter", h.ID)
			}
			if set[h.ID] {
				hit++
			}
		}
		total += len(want)
	}
	return float64(hit) / float64(total)
}
