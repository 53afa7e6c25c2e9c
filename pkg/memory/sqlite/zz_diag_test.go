package sqlite

import (
	"fmt"
	"testing"

	"github.com/engram-memory/engram/internal/inject/injectbench"
	"github.com/engram-memory/engram/pkg/memory"
)

func TestZZUnits(t *testing.T) {
	x := newLexIndex()
	n := 100_000
	nodes := append(injectbench.SeedNodes(), injectbench.Filler(n, 1)...)
	for i := range nodes {
		x.set(uint32(i+1), docText(&nodes[i]))
	}
	for _, q := range append(injectbench.Questions, injectbench.Rich) {
		fmt.Println("Q:", q)
		for _, u := range x.units(memory.Terms(q), 0) {
			names := []string{}
			for _, l := range u.lists {
				names = append(names, l.name)
			}
			fmt.Printf("   df=%6d (%.1f%%) w=%.2f we=%.2f group=%v lists=%v\n", u.df, 100*float64(u.df)/float64(n), u.w, u.we, u.group, names)
		}
	}
}
