package redis

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
)

// TestNaturalKeyOrder: comparing naturalKey encodings byte by byte (as a
// sorted set orders members of one score) agrees with memory.NaturalCompare
// on every pair, and naturalID decodes every key.
func TestNaturalKeyOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := "0123456789-/:ab~\x00\xff"
	ids := []string{"", "0", "00", "9", "10", "a9", "a10", "conv-43-D1-2", "conv-43-D1-10", "0190ab12cd34ef5601234567"}
	for range 400 {
		var sb strings.Builder
		for range r.IntN(12) {
			sb.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		ids = append(ids, sb.String())
	}
	for _, a := range ids {
		if got := naturalID(naturalKey(a)); got != a {
			t.Fatalf("naturalID(naturalKey(%q)) = %q", a, got)
		}
		for _, b := range ids {
			if got, want := strings.Compare(naturalKey(a), naturalKey(b)), memory.NaturalCompare(a, b); got != want {
				t.Fatalf("keys of %q and %q compare %d, NaturalCompare says %d", a, b, got, want)
			}
		}
	}
}

func FuzzNaturalKey(f *testing.F) {
	f.Add("conv-43-D1-10", "conv-43-D1-9")
	f.Add("0190ab12cd34ef5601234567", "a")
	f.Fuzz(func(t *testing.T, a, b string) {
		if got := naturalID(naturalKey(a)); got != a {
			t.Fatalf("naturalID(naturalKey(%q)) = %q", a, got)
		}
		if got, want := strings.Compare(naturalKey(a), naturalKey(b)), memory.NaturalCompare(a, b); got != want {
			t.Fatalf("keys of %q and %q compare %d, NaturalCompare says %d", a, b, got, want)
		}
		_ = naturalID(a) // any stored member decodes without a panic
	})
}
