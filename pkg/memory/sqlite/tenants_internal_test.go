package sqlite

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// checkTenantCounts recomputes the per-tenant counts (tenants.go) from the
// live documents and compares them with the index's.
func checkTenantCounts(t *testing.T, x *lexIndex, live map[uint32]string, tenantOf map[uint32]uint32) {
	t.Helper()
	df := map[uint64]int32{}
	other := map[uint32]int32{}
	n := map[uint32]tenantCount{}
	for rid, text := range live {
		tn := tenantOf[rid]
		if x.tenantOf(rid) != tn {
			t.Fatalf("docTenant[%d] = %d, want %d", rid, x.tenantOf(rid), tn)
		}
		c := map[string]int{}
		tokens(text, c)
		if tn == 0 {
			continue
		}
		l := 0
		for w, k := range c {
			l += k
			id := x.ids[w]
			df[tenantKey(tn, id)]++
			other[id]++
		}
		tc := n[tn]
		tc.n++
		tc.total += int64(l)
		n[tn] = tc
	}
	if !maps.Equal(df, x.tenantDF) && !(len(df) == 0 && len(x.tenantDF) == 0) {
		t.Fatalf("tenantDF differs: %d vs %d entries", len(df), len(x.tenantDF))
	}
	if !maps.Equal(other, x.otherDF) && !(len(other) == 0 && len(x.otherDF) == 0) {
		t.Fatalf("otherDF differs")
	}
	if len(n) != len(x.tenantN) {
		t.Fatalf("tenantN: %d vs %d", len(n), len(x.tenantN))
	}
	for k, v := range n {
		if c := x.tenantN[k]; c == nil || *c != v {
			t.Fatalf("tenantN[%d] = %v, want %v", k, c, v)
		}
	}
}

// One index shared by tenants answers each tenant's searches as an index
// of that tenant's documents alone does (the same documents, the same
// float32 scores), pruned or not, through the visible-documents path too,
// with random tenants, prefix families (one tenant's token that is another
// tenant's prefix, a prefix crowded by another tenant's vocabulary),
// re-indexing with and without the old text, removals, erasures and
// compaction, plain and packed lists; and its per-tenant counts are those
// of a recount after every round. (From a review of stop 47's change.)
func TestTenantStatisticsMatchAnIndexPerTenant(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { tenantsRound(t, seed) })
	}
}

func tenantsRound(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	vocab := []string{}
	for i := range 120 {
		vocab = append(vocab, fmt.Sprintf("w%s%d", strings.Repeat("q", i%3), i))
	}
	// Prefix families; "deploy" is written by tenant 2 only, and the
	// "deployz" words (crowding the prefix) by tenant 3 only.
	fam := []string{"deployment", "deployer", "deploying", "alpha", "alphabet", "alphas", "the", "what", "them", "cluster", "clusters"}
	for i := range 50 {
		fam = append(fam, fmt.Sprintf("deployz%02d", i)) // crowding a prefix
	}
	const tenants = 4
	word := func(tn uint32) string {
		if tn == 2 && rng.IntN(6) == 0 {
			return "deploy"
		}
		if rng.IntN(4) == 0 {
			w := fam[rng.IntN(len(fam))]
			if strings.HasPrefix(w, "deployz") && tn != 3 {
				return "deployment"
			}
			return w
		}
		i := int(float64(len(vocab)) * rng.Float64() * rng.Float64())
		return vocab[i]
	}
	text := func(tn uint32) string {
		var sb strings.Builder
		for range 2 + rng.IntN(20) {
			sb.WriteString(word(tn))
			sb.WriteByte(' ')
		}
		return sb.String()
	}
	shared := newLexIndex()
	alone := make([]*lexIndex, tenants)
	for i := range alone {
		alone[i] = newLexIndex()
	}
	shared.forcePack = seed%2 == 1
	for _, a := range alone {
		a.forcePack = shared.forcePack
	}
	live := map[uint32]string{}
	tenantOf := map[uint32]uint32{}
	byText := seed%3 != 0
	set := func(r, tn uint32) {
		tx := text(tn)
		c := map[string]int{}
		tokens(tx, c)
		var old, oldAlone map[string]int
		if o, ok := live[r]; ok && byText {
			old = map[string]int{}
			tokens(o, old)
		}
		if ot, ok := tenantOf[r]; ok && ot != tn {
			// The rid goes to another tenant (a store refuses to move a
			// node, but a rid freed by an erasure is reused): the old
			// tenant's own index drops it.
			var oo map[string]int
			if byText {
				oo = map[string]int{}
				tokens(live[r], oo)
			}
			alone[ot].remove(r, oo)
		} else {
			oldAlone = old
		}
		shared.setCounts(r, tn, c, old)
		alone[tn].setCounts(r, tn, maps.Clone(c), oldAlone)
		live[r] = tx
		tenantOf[r] = tn
	}
	remove := func(r uint32) {
		tn, ok := tenantOf[r]
		if !ok {
			return
		}
		var old map[string]int
		if byText {
			old = map[string]int{}
			tokens(live[r], old)
		}
		shared.remove(r, old)
		alone[tn].remove(r, old)
		delete(live, r)
		delete(tenantOf, r)
	}
	removeAll := func(rs []uint32) {
		per := map[uint32][]uint32{}
		for _, r := range rs {
			if tn, ok := tenantOf[r]; ok {
				per[tn] = append(per[tn], r)
				delete(live, r)
				delete(tenantOf, r)
			}
		}
		shared.removeAll(rs)
		shared.compact()
		for tn, l := range per {
			alone[tn].removeAll(l)
			alone[tn].compact()
		}
	}
	docs := 3000
	for _, r := range rng.Perm(docs) {
		set(uint32(r+1), uint32(rng.IntN(tenants)))
	}
	checkTenantCounts(t, shared, live, tenantOf)
	queries := [][]string{{"deployment"}, {"deploy"}, {"deploying", "cluster"}, {"alpha", "the"}, {"the", "what", "w1"}, {"w0", "w3", "alphabet"}, {"deployer", "w2", "them"}}
	var sc, sca scratch
	mism := 0
	for round := range 12 {
		for range 400 {
			r := uint32(rng.IntN(docs+40) + 1)
			switch rng.IntN(6) {
			case 0:
				remove(r)
			case 1:
				set(r, uint32(rng.IntN(tenants))) // maybe another tenant
			default:
				tn := uint32(rng.IntN(tenants))
				if o, ok := tenantOf[r]; ok {
					tn = o
				}
				set(r, tn)
			}
		}
		if round%4 == 3 {
			var rs []uint32
			for range 40 {
				rs = append(rs, uint32(rng.IntN(docs)+1))
			}
			removeAll(rs)
		}
		checkTenantCounts(t, shared, live, tenantOf)
		for _, q := range queries {
			for tn := range uint32(tenants) {
				acc := func(rid uint32) bool { return tenantOf[rid] == tn && live[rid] != "" }
				sc.tenant, sca.tenant = tn, tn
				for _, k := range []int{0, 5, 20} {
					var got, want []scoredItem
					if k == 0 {
						got = topVisiting(shared, &sc, q, 1000, acc, true)
						want = topVisiting(alone[tn], &sca, q, 1000, acc, true)
					} else {
						got = topOf(shared, &sc, q, k, acc)
						want = topOf(alone[tn], &sca, q, k, acc)
					}
					if k > 0 {
						var vis []uint32
						for rid, o := range tenantOf {
							if o == tn {
								vis = append(vis, rid)
							}
						}
						slices.Sort(vis)
						gv, _ := topVisible(shared, &sc, q, k, vis)
						if !slices.Equal(got, gv) {
							t.Errorf("visible != search: round %d tenant %d q %v k %d:\n %v\n %v", round, tn, q, k, first4(got), first4(gv))
						}
						shared.noPrune = true
						ref := topOf(shared, &sc, q, k, acc)
						shared.noPrune = false
						if !slices.Equal(got, ref) {
							t.Errorf("pruned != noPrune: round %d tenant %d q %v k %d:\n %v\n %v", round, tn, q, k, first4(got), first4(ref))
						}
					}
					if !slices.Equal(got, want) {
						mism++
						if mism < 6 {
							t.Errorf("round %d tenant %d q %v k %d:\n shared %v\n alone  %v", round, tn, q, k, first4(got), first4(want))
						}
					}
				}
			}
		}
	}
	if shared.pruned.Load() == 0 {
		t.Error("no search was pruned: the pruned path is not covered")
	}
	if mism > 0 {
		t.Errorf("%d mismatches", mism)
	}
}

func first4(s []scoredItem) []scoredItem { return s[:min(4, len(s))] }

// A tenant whose documents hold "deployment" but not "deploy", in a store
// where another tenant's do: the prefix's own token is another tenant's
// only, and the tenant's group is its one list (scored with its word, as
// alone), not two.
func TestPrefixTokenOfAnotherTenantOnly(t *testing.T) {
	shared, alone := newLexIndex(), newLexIndex()
	put := func(x *lexIndex, rid, tn uint32, text string) {
		c := map[string]int{}
		tokens(text, c)
		x.setCounts(rid, tn, c, nil)
	}
	for i := range 30 {
		tx := fmt.Sprintf("deployment w%d w%d filler%d", i%7, i%5, i)
		if i%3 == 0 {
			tx += " deployment"
		}
		put(shared, uint32(i+1), 0, tx)
		put(alone, uint32(i+1), 0, tx)
	}
	for i := range 30 {
		put(shared, uint32(100+i), 1, fmt.Sprintf("deploy other%d", i))
	}
	acc := func(rid uint32) bool { return rid < 100 }
	var sc, sca scratch
	for _, q := range [][]string{{"deployment"}, {"deployment", "w1"}, {"deployment", "w1", "w2", "w3"}} {
		got := topVisiting(shared, &sc, q, 100, acc, true)
		want := topVisiting(alone, &sca, q, 100, acc, true)
		if len(got) == 0 || !slices.Equal(got, want) {
			t.Errorf("q %v:\n shared %v\n alone  %v", q, first4(got), first4(want))
		}
	}
}

// Terms whose documents were all removed stay in the dictionary until
// compact; they take no place among a prefix's expansions (they took 40
// of "alpha"'s, and the live "alphabet" after them was not matched), in a
// store of one tenant as beside another.
func TestRemovedTermsTakeNoExpansionPlace(t *testing.T) {
	for _, other := range []bool{false, true} {
		x := newLexIndex()
		put := func(rid, tn uint32, text string) {
			c := map[string]int{}
			tokens(text, c)
			x.setCounts(rid, tn, c, nil)
		}
		for i := range 40 {
			put(uint32(i+1), 0, fmt.Sprintf("alphaaa%02d", i))
		}
		for i := range 40 {
			x.remove(uint32(i+1), nil) // dead, not compacted (fewer than 1,024)
		}
		for i := range 10 {
			put(uint32(100+i), 0, fmt.Sprintf("alphabet x%d", i))
		}
		if other {
			put(500, 7, "unrelated")
		}
		var sc scratch
		got := topVisiting(x, &sc, []string{"alpha"}, 100, func(rid uint32) bool { return rid < 500 }, true)
		if len(got) != 10 {
			t.Errorf("another tenant %v: %d hits for alpha, want the 10 alphabet memories", other, len(got))
		}
	}
}
