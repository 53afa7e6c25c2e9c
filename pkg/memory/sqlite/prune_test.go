package sqlite

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
)

// topOf runs search as Store.Lexical does (want k, the filter as accept
// and in the visit, the stop signal) and returns the k best accepted
// documents with their scores.
func topOf(x *lexIndex, sc *scratch, q []string, k int, accept func(uint32) bool) []scoredItem {
	return topVisiting(x, sc, q, k, accept, false)
}

// topVisiting is topOf; all: the search visits every document it touched
// (no ranking of them first, no stop signal), as a reference for the
// best-first visit.
func topVisiting(x *lexIndex, sc *scratch, q []string, k int, accept func(uint32) bool, all bool) []scoredItem {
	top := scoredTop{k: k}
	visit := func(rid uint32, s float64) bool {
		if len(top.items) == top.k && s < top.items[len(top.items)-1].score {
			return false
		}
		if accept == nil || accept(rid) {
			top.add(scoredItem{rid: rid, id: fmt.Sprintf("n%010d", rid*2654435761), score: s})
		}
		return true
	}
	more := func() bool { return len(top.items) < top.k }
	if all {
		more = nil // every document touched visited, in no order
	}
	if left := x.search(q, sc, k, accept, more, visit); left && len(top.items) < top.k {
		top.items = top.items[:0]
		x.search(q, sc, 0, accept, nil, visit)
	}
	return top.items
}

// TestPrunedSearchMatchesExhaustive: the pruned search (MaxScore over
// rid-ordered lists) gives the same k best accepted documents, with the
// same scores bit for bit, as scoring every unit in full, on random
// corpora and queries, under filters rejecting none to most documents,
// and after re-indexing and removals (stale postings, unsorted tails,
// compactions).
func TestPrunedSearchMatchesExhaustive(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 35))
	c := memorytest.NewBenchCorpus()
	pruned, failed := 0, 0
	for round := range 6 {
		x := newLexIndex()
		x.forcePack = round%2 == 1 // lists in blocks (a short document's index keeps them plain)
		docs := 1500 + round*700
		// Skewed words so that queries mix rare, mid and common terms,
		// prefixes included ("alpha" -> "alphabet", "alphas").
		vocab := make([]string, 400)
		for i := range vocab {
			vocab[i] = fmt.Sprintf("w%s%d", strings.Repeat("q", i%3), i)
		}
		vocab = append(vocab, "alpha", "alphabet", "alphas", "the", "what", "them")
		word := func() string {
			i := int(float64(len(vocab)) * rng.Float64() * rng.Float64() * rng.Float64())
			if rng.IntN(10) == 0 {
				return vocab[len(vocab)-1-rng.IntN(6)]
			}
			return vocab[i]
		}
		text := func() string { return mixedText(rng, c, word, 30) }
		live := map[uint32]string{} // what the index should hold
		// Even rounds give a re-indexed or removed document's previous
		// text (as the store's writes do: its terms derived from it), odd
		// ones do not (each list is searched for it).
		byText := round%2 == 0
		set := func(r uint32) {
			t := text()
			if old, ok := live[r]; ok && byText {
				x.reset(r, t, old)
			} else {
				x.set(r, t)
			}
			live[r] = t
		}
		remove := func(r uint32) {
			var old map[string]int
			if t, ok := live[r]; ok && byText {
				old = map[string]int{}
				tokens(t, old)
			}
			x.remove(r, old)
			delete(live, r)
		}
		// Rids written out of order (as interleaved projects load).
		rids := rng.Perm(docs)
		for _, r := range rids {
			set(uint32(r + 1))
		}
		for range docs / 3 { // churn: re-index and remove
			r := uint32(rng.IntN(docs) + 1)
			if rng.IntN(3) == 0 {
				remove(r)
			} else {
				set(r)
			}
		}
		var sc scratch
		for qi := range 200 {
			if qi%5 == 4 { // changes between queries (the union counts cached go stale)
				for range 1 + rng.IntN(20) {
					r := uint32(rng.IntN(docs+50) + 1)
					if rng.IntN(4) == 0 {
						remove(r)
					} else {
						set(r)
					}
				}
			}
			var q []string
			if qi%3 == 0 {
				q = c.Query()
			}
			for range 1 + rng.IntN(5) {
				q = append(q, word())
			}
			q = memory.Terms(strings.Join(q, " "))
			k := []int{1, 5, 20, 60}[rng.IntN(4)]
			rejectEvery := []uint32{0, 0, 2, 10, 97}[rng.IntN(5)]
			var accept func(uint32) bool
			if rejectEvery > 0 {
				accept = func(rid uint32) bool { return (rid*2654435761)%rejectEvery != 0 }
			}
			x.noPrune = true
			want := topOf(x, &sc, q, k, accept)
			x.noPrune = false
			before, fails := x.pruned.Load(), x.failed.Load()
			got := topOf(x, &sc, q, k, accept)
			pruned += int(x.pruned.Load() - before)
			failed += int(x.failed.Load() - fails)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d query %v k %d rejecting 1 in %d:\npruned     %v\nexhaustive %v", round, q, k, rejectEvery, got, want)
			}
			if all := topVisiting(x, &sc, q, k, accept, true); !slices.Equal(all, want) {
				t.Fatalf("round %d query %v k %d rejecting 1 in %d:\nbest first %v\nvisiting all %v", round, q, k, rejectEvery, want, all)
			}
			if scans := x.scanned.Load(); byText != (scans == 0) {
				t.Fatalf("round %d: %d documents removed by looking in every list (previous texts given: %v)", round, scans, byText)
			}
			if qi%50 == 49 {
				// The churned index (stale postings, unsorted tails) answers
				// as one built afresh from the documents it should hold.
				fresh := newLexIndex()
				for _, r := range slices.Sorted(maps.Keys(live)) {
					fresh.set(r, live[r])
				}
				x.compact() // the dead terms out of the dictionary, as fresh has none
				if again := topOf(x, &sc, q, k, accept); !slices.Equal(again, got) {
					t.Fatalf("round %d query %v: compaction changed the answer:\nafter  %v\nbefore %v", round, q, again, got)
				}
				var fsc scratch
				if f := topOf(fresh, &fsc, q, k, accept); !slices.Equal(f, got) {
					t.Fatalf("round %d query %v k %d: the churned index answered\n%v\none built afresh\n%v", round, q, k, got, f)
				}
			}
		}
	}
	t.Logf("%d queries pruned, %d tried and scored in full", pruned, failed)
	if pruned < 40 {
		t.Errorf("only %d queries were pruned: the test does not exercise pruning", pruned)
	}
}

// mixedText is a random document: one in three a memory of the bench
// corpus, the others 3 to most+2 words of word.
func mixedText(rng *rand.Rand, c *memorytest.BenchCorpus, word func() string, most int) string {
	if rng.IntN(3) == 0 {
		n := c.Node()
		return docText(&n)
	}
	var sb strings.Builder
	for range 3 + rng.IntN(most) {
		sb.WriteString(word())
		sb.WriteByte(' ')
	}
	return sb.String()
}

// TestRemoveByTermsOrScan: a document removed or re-indexed with the text
// it was indexed with is removed through its terms; with another text, or
// none, by looking it up in every list (the fingerprint tells them
// apart); an erasure removes many at once. Either way the index then holds
// exactly what one built afresh from the documents left holds: every
// list's live postings, document frequencies and counts.
func TestRemoveByTermsOrScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := memorytest.NewBenchCorpus()
	for _, pack := range []bool{false, true} {
		x := newLexIndex()
		x.forcePack = pack
		live := map[uint32]string{}
		text := func() string {
			n := c.Node()
			return docText(&n) + " " + fmt.Sprintf("w%d", rng.IntN(300))
		}
		for r := range uint32(3000) {
			live[r+1] = text()
			x.set(r+1, live[r+1])
		}
		counts := func(t string) map[string]int {
			m := map[string]int{}
			tokens(t, m)
			return m
		}
		wantScans := int64(0)
		for i := range 900 {
			r := uint32(rng.IntN(3200) + 1)
			old, indexed := live[r]
			switch i % 4 {
			case 0: // removed, its text given
				x.remove(r, counts(old))
				delete(live, r)
			case 1: // re-indexed, its text given
				t := text()
				x.reset(r, t, old)
				live[r] = t
			case 2: // removed with another live document's text (its terms all in the dictionary): found by looking
				other := live[r%3000+1]
				if r%3000+1 == r {
					other = live[r%3000+2]
				}
				x.remove(r, counts(other))
				delete(live, r)
				if indexed {
					wantScans++
				}
			case 3: // re-indexed, the previous text not known
				t := text()
				x.set(r, t)
				live[r] = t
				if indexed {
					wantScans++
				}
			}
		}
		if got := x.scanned.Load(); got != wantScans {
			t.Fatalf("pack %v: %d documents looked up in every list, want %d", pack, got, wantScans)
		}
		var erased []uint32
		for r := range live {
			if rng.IntN(5) == 0 {
				erased = append(erased, r, r) // twice: counted once
				delete(live, r)
			}
		}
		x.removeAll(append(erased, 99999))
		fresh := newLexIndex()
		for _, r := range slices.Sorted(maps.Keys(live)) {
			fresh.set(r, live[r])
		}
		if x.nDocs != fresh.nDocs || x.totalLen != fresh.totalLen || x.live != fresh.live {
			t.Fatalf("pack %v: docs %d, length %d, live postings %d; afresh %d, %d, %d", pack, x.nDocs, x.totalLen, x.live, fresh.nDocs, fresh.totalLen, fresh.live)
		}
		liveOf := func(tm *term) []posting {
			ps := slices.DeleteFunc(tm.all(nil), func(p posting) bool { return p.tf == 0 })
			slices.SortFunc(ps, byRid)
			return ps
		}
		for name, id := range fresh.ids {
			tm := x.term(name)
			if tm == nil || tm.df != fresh.tms[id].df || !slices.Equal(liveOf(tm), liveOf(&fresh.tms[id])) {
				t.Fatalf("pack %v: term %q differs from the index built afresh", pack, name)
			}
		}
		for i := range x.tms {
			if tm := &x.tms[i]; tm.df > 0 && fresh.term(tm.name) == nil {
				t.Fatalf("pack %v: term %q has %d live documents, none afresh", pack, tm.name, tm.df)
			}
		}
	}
}

// TestPrunedSearchConcurrent: searches share the index under the read
// lock (the union counts' cache, the counters): concurrent ones answer as
// one alone (run with -race).
func TestPrunedSearchConcurrent(t *testing.T) {
	c := memorytest.NewBenchCorpus()
	x := newLexIndex()
	for i := range 3000 {
		n := c.Node()
		x.set(uint32(i+1), docText(&n))
	}
	queries := make([][]string, 40)
	want := make([][]scoredItem, len(queries))
	var sc scratch
	for i := range queries {
		queries[i] = append(c.Query(), "the")
		want[i] = topOf(x, &sc, queries[i], 20, nil)
	}
	x.dfCache = dfCache{} // counted afresh, concurrently
	var wg sync.WaitGroup
	errs := make(chan string, 4*len(queries))
	for g := range 4 {
		wg.Go(func() {
			var sc scratch
			for i := range queries {
				i := (i + g*7) % len(queries)
				if got := topOf(x, &sc, queries[i], 20, nil); !slices.Equal(got, want[i]) {
					errs <- fmt.Sprintf("query %v: %v, alone %v", queries[i], got, want[i])
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
