package vecindex_test

import (
	"math"
	"testing"

	"github.com/engram-memory/engram/pkg/memory/vecindex"
)

func TestDotExported(t *testing.T) {
	for _, n := range []int{1, 7, 8, 13, 384} {
		a, b := make([]float32, n), make([]float32, n)
		var want float64
		for i := range a {
			a[i], b[i] = float32(i%7)-3, float32(i%5)*0.5
			want += float64(a[i]) * float64(b[i])
		}
		if got := vecindex.Dot(a, b); math.Abs(float64(got)-want) > 1e-3*math.Max(1, math.Abs(want)) {
			t.Errorf("Dot of %d floats = %v, want %v", n, got, want)
		}
	}
}
