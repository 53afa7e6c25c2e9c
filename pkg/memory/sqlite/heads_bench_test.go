package sqlite

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// headsIndex is an index of n nodes as a reload reads them (UTC times,
// shared strings), a quarter with paths and entities, in 50 conversations.
func headsIndex(n int) *index {
	r := rand.New(rand.NewPCG(5, 6))
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	x := newIndex(nil)
	changes := make([]change, 0, n)
	for i := range n {
		at := base.Add(time.Duration(r.IntN(1000)) * time.Minute)
		m := memory.Node{ID: fmt.Sprintf("conv-%d-D3-%d", i%50, i), Subkind: memory.Observation, Scope: memory.ScopeProject,
			ProjectID: "p", SessionID: fmt.Sprint("s", i%50), Label: "a label of some words",
			Digest: memory.Digest(memory.Observation, fmt.Sprint(i), "", ""), Confidence: 0.8, Weight: 1.25,
			Access: r.IntN(9), Source: memory.SourceAgent, AssertedBy: memory.AssertedInferred, Reach: memory.ReachHere,
			CreatedAt: at, UpdatedAt: at, ValidFrom: at, AccessedAt: at.Add(time.Hour)}
		if i%4 == 0 {
			m.Paths = []string{"pkg/a.go"}
			m.Entities = []memory.Entity{{Key: "k", Name: "K"}}
		}
		changes = append(changes, change{rid: uint32(i + 1), n: m})
	}
	x.apply(changes)
	return x
}

// BenchmarkCopyHeads: GetMany's and GetHeads's copy of 100 heads (a turn's
// candidates) out of 20,000.
func BenchmarkCopyHeads(b *testing.B) {
	x := headsIndex(20_000)
	r := rand.New(rand.NewPCG(7, 8))
	rids := make([]uint32, 100)
	for i := range rids {
		rids[i] = uint32(1 + r.IntN(20_000))
	}
	b.ReportAllocs()
	for b.Loop() {
		x.mu.RLock()
		_ = x.copyHeads(make([]memory.Node, 0, len(rids)), rids)
		x.mu.RUnlock()
	}
}

// BenchmarkSortConversations: sorting 20,000 heads' conversation lists
// (the load's sort), from shuffled lists.
func BenchmarkSortConversations(b *testing.B) {
	x := headsIndex(20_000)
	r := rand.New(rand.NewPCG(9, 10))
	for b.Loop() {
		b.StopTimer()
		for _, l := range x.convs {
			r.Shuffle(len(l.rids), func(i, j int) { l.rids[i], l.rids[j] = l.rids[j], l.rids[i] })
			l.unsorted = true
			x.convFilled = append(x.convFilled, l)
		}
		b.StartTimer()
		x.sortConversations()
	}
}
