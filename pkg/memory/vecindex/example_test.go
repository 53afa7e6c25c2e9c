package vecindex_test

import (
	"fmt"
	"strings"

	"github.com/engram-memory/engram/pkg/memory/vecindex"
)

func Example() {
	ix := vecindex.New(3)

	// Load at open: many vectors at once (parallel graph build).
	err := ix.AddBatch(
		[]string{"p1/deploy", "p1/tests", "p2/deploy"},
		[][]float32{{1, 0.1, 0}, {0, 1, 0}, {0.9, 0.2, 0}},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Keep in sync on writes: Add replaces, Remove deletes.
	if err := ix.Add("p1/lint", []float32{0.2, 1, 0}); err != nil {
		fmt.Println(err)
		return
	}
	ix.Remove("p1/tests")

	// Top 2 for project p1 only: the caller's filter goes in accept.
	inP1 := func(id string) bool { return strings.HasPrefix(id, "p1/") }
	for _, h := range ix.Search([]float32{1, 0, 0}, 2, inP1) {
		fmt.Printf("%s %.3f\n", h.ID, h.Score)
	}

	// Bad input is refused with a sentinel error.
	err = ix.Add("p1/short", []float32{1, 2})
	fmt.Println(err)
	// Output:
	// p1/deploy 0.995
	// p1/lint 0.196
	// add "p1/short": vecindex: wrong vector dimension: got 2, want 3
}
