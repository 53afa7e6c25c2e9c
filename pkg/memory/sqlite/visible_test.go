package sqlite

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
)

// topVisible is topOf for searchVisible over the documents vis (sorted),
// as Store.Lexical runs it.
func topVisible(x *lexIndex, sc *scratch, q []string, k int, vis []uint32) ([]scoredItem, bool) {
	top := scoredTop{k: k}
	visit := func(rid uint32, s float64) bool {
		if len(top.items) == top.k && s < top.items[len(top.items)-1].score {
			return false
		}
		top.add(scoredItem{rid: rid, id: fmt.Sprintf("n%010d", rid*2654435761), score: s})
		return true
	}
	more := func() bool { return len(top.items) < top.k }
	sc.vis = sc.markVisible(vis, len(x.docLen))
	defer sc.unmarkVisible()
	left := x.searchVisible(q, sc, k, vis, more, visit)
	if left && len(top.items) < top.k {
		top.items = top.items[:0]
		x.searchVisible(q, sc, 0, vis, nil, visit)
	}
	return top.items, left
}

// TestSearchVisibleMatches: a search over the documents a filter sees
// (searchVisible) scores each of them as the search over the whole index
// does, bit for bit (every unit in full: want 0), on random corpora of
// many projects of skewed sizes with prefix groups, common words, lists in
// blocks or plain, re-indexing and removals; and where the filter sees
// every document its k best are the whole index's (the common words' rule
// counts the same documents). The sets of documents are checked to
// leave the scratch's bit set clear.
func TestSearchVisibleMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 7))
	c := memorytest.NewBenchCorpus()
	for round := range 4 {
		x := newLexIndex()
		x.forcePack = round%2 == 1
		docs := 2000 + round*900
		vocab := make([]string, 300)
		for i := range vocab {
			vocab[i] = fmt.Sprintf("w%s%d", strings.Repeat("q", i%3), i)
		}
		vocab = append(vocab, "alpha", "alphabet", "alphas", "the", "what", "them")
		word := func() string {
			if rng.IntN(8) == 0 {
				return vocab[len(vocab)-1-rng.IntN(6)]
			}
			return vocab[int(float64(len(vocab))*rng.Float64()*rng.Float64())]
		}
		text := func() string { return mixedText(rng, c, word, 25) }
		// Projects of skewed sizes: project 0 holds about half.
		project := map[uint32]int{}
		live := map[uint32]string{}
		set := func(r uint32) {
			t := text()
			if old, ok := live[r]; ok {
				x.reset(r, t, old)
			} else {
				x.set(r, t)
			}
			live[r] = t
			project[r] = min(int(rng.ExpFloat64()*4), 30)
		}
		for _, r := range rng.Perm(docs) {
			set(uint32(r + 1))
		}
		for range docs / 4 {
			r := uint32(rng.IntN(docs) + 1)
			if rng.IntN(3) == 0 {
				old := map[string]int{}
				tokens(live[r], old)
				x.remove(r, old)
				delete(live, r)
			} else {
				set(r)
			}
		}
		visibleOf := func(p int) []uint32 {
			var vis []uint32
			for r := range live {
				if project[r] == p {
					vis = append(vis, r)
				}
			}
			slices.Sort(vis)
			return vis
		}
		var all []uint32
		for r := range live {
			all = append(all, r)
		}
		slices.Sort(all)
		var sc scratch
		common := 0
		for qi := range 120 {
			var q []string
			if qi%3 == 0 {
				q = c.Query()
			}
			for range 1 + rng.IntN(5) {
				q = append(q, word())
			}
			q = memory.Terms(strings.Join(q, " "))
			x.noPrune = true
			whole := map[uint32]float64{}
			x.search(q, &sc, 0, nil, nil, func(rid uint32, s float64) bool { whole[rid] = s; return true })
			x.noPrune = false
			p := []int{0, 1, 2, 5, 12}[rng.IntN(5)]
			vis := visibleOf(p)
			got := map[uint32]float64{}
			sc.vis = sc.markVisible(vis, len(x.docLen))
			x.searchVisible(q, &sc, 0, vis, nil, func(rid uint32, s float64) bool { got[rid] = s; return true })
			sc.unmarkVisible()
			for _, w := range sc.mark {
				if w != 0 {
					t.Fatal("the bit set is not clear after a search")
				}
			}
			n := 0
			for rid, s := range whole {
				if project[rid] != p {
					continue
				}
				n++
				if g, ok := got[rid]; !ok || g != s {
					t.Fatalf("round %d query %v project %d: document %d scores %v (found %v), the whole index's %v", round, q, p, rid, g, ok, s)
				}
			}
			if n != len(got) {
				t.Fatalf("round %d query %v project %d: %d documents scored, the whole index touches %d of the project's", round, q, p, len(got), n)
			}
			// The k best of the project are the whole index's search's
			// with the project as its filter, and seeing every document,
			// the whole index's.
			k := []int{1, 5, 20, 60}[rng.IntN(4)]
			want := topOf(x, &sc, q, k, func(rid uint32) bool { return project[rid] == p })
			top, left := topVisible(x, &sc, q, k, vis)
			if !slices.Equal(top, want) {
				t.Fatalf("round %d query %v project %d k %d:\nvisible %v\nwhole   %v", round, q, p, k, top, want)
			}
			if left {
				common++
			}
			if top, _ := topVisible(x, &sc, q, k, all); !slices.Equal(top, topOf(x, &sc, q, k, nil)) {
				t.Fatalf("round %d query %v k %d: seeing every document, the visible search's k best are not the whole index's", round, q, k)
			}
		}
		if common == 0 {
			t.Fatalf("round %d: no search left common words out: the test does not reach the rule", round)
		}
	}
}

// TestScopeSetsHoldWhatFiltersSee: the scope sets (scopes.go) list, for
// any filter, every node that memory.Visible shows it, and each project's
// list is exactly its nodes, sorted, through writes that add nodes, move
// them between tenants and projects, change their reach and erase them.
func TestScopeSetsHoldWhatFiltersSee(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 11))
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	pick := func(vals ...string) string { return vals[r.IntN(len(vals))] }
	x := newIndex(nil)
	nodes := map[uint32]memory.Node{}
	write := func(rid uint32) {
		n := memory.Node{ID: fmt.Sprintf("n%d", rid), TenantID: pick("", "", "acme"), ProjectID: pick("", "p", "q", "r", "s"),
			SessionID: pick("", "s1"), Scope: memory.Scope(pick(string(memory.ScopeSession), string(memory.ScopeProject), string(memory.ScopeGlobal))),
			Reach: memory.Reach(pick(string(memory.ReachHere), string(memory.ReachAnywhere))), Subkind: memory.Decision,
			Label: "label " + pick("alpha", "beta"), Confidence: r.Float64()}
		x.apply([]change{{rid: rid, n: n, text: true}})
		nodes[rid] = n
	}
	check := func(step string) {
		t.Helper()
		x.mu.RLock()
		defer x.mu.RUnlock()
		byRef := map[memory.ProjectRef][]uint32{}
		for rid, n := range nodes {
			ref := memory.ProjectRef{Tenant: n.TenantID, Project: n.ProjectID}
			byRef[ref] = append(byRef[ref], rid)
		}
		for ref, want := range byRef {
			slices.Sort(want)
			if got := x.scopes.byProject[ref]; !slices.Equal(got, want) {
				t.Fatalf("%s: project %v lists %v, holds %v", step, ref, got, want)
			}
		}
		if len(x.scopes.byProject) != len(byRef) {
			t.Fatalf("%s: %d projects listed, %d hold nodes", step, len(x.scopes.byProject), len(byRef))
		}
		for range 50 {
			f := memory.Filter{TenantID: pick("", "acme", "nobody"), ProjectID: pick("", "p", "q", "unknown"), SessionID: pick("", "s1"),
				CrossProject: r.IntN(2) == 0, IncludeArchived: true, IncludeSuperseded: true}
			vis := x.scopes.visible(&f, nil)
			if len(vis) > x.scopes.visibleSize(&f) || !slices.IsSorted(vis) || len(slices.Compact(slices.Clone(vis))) != len(vis) {
				t.Fatalf("%s: filter %+v: visible %v (size %d): not sorted, repeated or over the size", step, f, vis, x.scopes.visibleSize(&f))
			}
			for rid, n := range nodes {
				if memory.Visible(&n, f, now) {
					if _, ok := slices.BinarySearch(vis, rid); !ok {
						t.Fatalf("%s: filter %+v sees node %+v (rid %d), not in its scope sets %v", step, f, n, rid, vis)
					}
				}
			}
		}
	}
	for rid := uint32(1); rid <= 400; rid++ {
		write(rid)
	}
	check("written")
	for range 300 { // rewrites: other tenants, projects, reaches
		write(uint32(1 + r.IntN(400)))
	}
	check("rewritten")
	var gone []uint32
	var ids []string
	for rid := range nodes {
		if r.IntN(3) == 0 {
			gone = append(gone, rid)
			ids = append(ids, nodes[rid].ID)
		}
	}
	x.erase(gone, ids)
	for _, rid := range gone {
		delete(nodes, rid)
	}
	check("erased")
	for rid := uint32(401); rid <= 450; rid++ {
		write(rid)
	}
	write(3) // an erased rid written again, or a rewrite
	check("written after the erasure")
}

// TestScopeSetsDuringTheLoad: while the store loads (project by project),
// a tenant's reach-anywhere rids arrive out of order and are appended, not
// inserted in place (quadratic at hundreds of thousands); a CrossProject
// filter of that tenant is not given the unsorted list (its size is
// reported as unusable), and once the load settles every list is sorted
// and exact.
func TestScopeSetsDuringTheLoad(t *testing.T) {
	x := newIndex(nil)
	x.scopes.beginLoad()
	var want []uint32
	// Projects loaded one after another, their rids interleaved.
	for p := range 4 {
		for i := range 50 {
			rid := uint32(1 + i*4 + p)
			x.apply([]change{{rid: rid, n: memory.Node{ID: fmt.Sprintf("n%d", rid), ProjectID: fmt.Sprintf("p%d", p),
				Scope: memory.ScopeProject, Reach: memory.ReachAnywhere, Subkind: memory.Decision, Label: "x"}, text: true}})
			want = append(want, rid)
		}
	}
	x.erase([]uint32{6}, []string{"n6"}) // an erasure while loading
	want = slices.DeleteFunc(want, func(r uint32) bool { return r == 6 })
	f := memory.Filter{ProjectID: "p1", CrossProject: true}
	if n := x.scopes.visibleSize(&f); n != math.MaxInt {
		t.Fatalf("while loading, out of order: size %d, want it unusable", n)
	}
	if n := x.scopes.visibleSize(&memory.Filter{ProjectID: "p1"}); n != 49 {
		t.Fatalf("a filter that reads no anywhere list: size %d, want 49 (one erased)", n)
	}
	x.scopes.settle()
	slices.Sort(want)
	if got := x.scopes.anywhere[""]; !slices.Equal(got, want) {
		t.Fatalf("settled anywhere list %v, want %v", got, want)
	}
	if n := x.scopes.visibleSize(&f); n != 49+len(want) {
		t.Fatalf("settled: size %d", n)
	}
	if vis := x.scopes.visible(&f, nil); len(vis) != len(want) || !slices.IsSorted(vis) {
		t.Fatalf("settled: visible %v", vis)
	}
}
