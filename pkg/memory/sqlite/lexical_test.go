package sqlite

import (
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/inject/injectbench"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
)

func TestLexIndexBM25(t *testing.T) {
	x := newLexIndex()
	docs := []string{"redis cluster", "redis", "postgres", "mysql", "sqlite wal", "alpha", "beta", "gamma"}
	for i, d := range docs {
		x.set(uint32(i+1), d)
	}
	var sc scratch
	got := map[uint32]float64{}
	x.search([]string{"redis", "wal"}, &sc, 0, nil, nil, func(rid uint32, s float64) bool { got[rid] = s; return true })
	if len(got) != 3 {
		t.Fatalf("matches: %v", got)
	}
	// hand-computed BM25 for doc 2 ("redis", length 1): one term, df 2, N 8,
	// matched as its stem family and as the word itself (ExactWeight more)
	avg := 10.0 / 8 // 10 tokens in 8 documents
	idf := math.Log(1 + (8-2+0.5)/(2+0.5))
	want := (1 + memory.ExactWeight) * idf * 1 * (bm25K1 + 1) / (1 + bm25K1*(1-bm25B+bm25B*1/avg))
	if math.Abs(got[2]-want) > 1e-5 {
		t.Fatalf("bm25 = %v, want %v", got[2], want)
	}
	if !(got[5] > got[1]) {
		t.Fatalf("rarer term (wal) must outscore: %v", got)
	}
	// re-indexing and removal drop the old postings
	x.set(2, "postgres")
	x.remove(1, nil)
	got = map[uint32]float64{}
	x.search([]string{"redis"}, &sc, 0, nil, nil, func(rid uint32, s float64) bool { got[rid] = s; return true })
	if len(got) != 0 {
		t.Fatalf("stale postings matched: %v", got)
	}
	for i := range 3000 { // force a compaction
		x.set(uint32(100+i%50), fmt.Sprintf("churn%d text", i))
	}
	got = map[uint32]float64{}
	x.search([]string{"churn2999"}, &sc, 0, nil, nil, func(rid uint32, s float64) bool { got[rid] = s; return true })
	if len(got) != 1 {
		t.Fatalf("after churn: %v", got)
	}
	if p := x.term("text").count(); p >= 3000 || x.term("text").df != 50 {
		t.Fatalf("no compaction: %d postings of \"text\", df %d", p, x.term("text").df)
	}
}

// TestLexSearchCommonWords: once the rarer words found 2 x want documents,
// a common word brings in no document; a common word's stem family is not
// scored, and its own token adds ExactWeight x its idf (x StopWordWeight:
// "the" is a stop word) to the documents
// found that can still be among the want best accepted ones (commonCut),
// the same sum on the one-pass and the general path.
func TestLexSearchCommonWords(t *testing.T) {
	x := newLexIndex()
	docs := []string{"zebra the", "zebra", "zebra theme", "zebra", "the", "the", "the"}
	for i := range 40 {
		docs = append(docs, fmt.Sprintf("filler%d the", i))
	}
	for i, d := range docs {
		x.set(uint32(i+1), d)
	}
	search := func(want int, accept func(uint32) bool) map[uint32]float64 {
		var sc scratch
		got := map[uint32]float64{}
		x.search([]string{"zebra", "the"}, &sc, want, accept, func() bool { return true }, func(rid uint32, s float64) bool { got[rid] = s; return true })
		return got
	}
	N, avg := float64(len(docs)), float64(x.totalLen)/float64(len(docs))
	idf := func(df float64) float64 { return math.Log(1 + (N-df+0.5)/(df+0.5)) }
	bm := func(w, tf, dl float64) float64 { return w * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*dl/avg)) }
	zebra := func(dl float64) float64 { return bm((1+memory.ExactWeight)*idf(4), 1, dl) }
	exact := map[uint32]float64{
		1: zebra(2) + bm(memory.StopWordWeight*memory.ExactWeight*idf(44), 1, 2), // "the" itself, at its own idf (a stop word: at StopWordWeight)
		2: zebra(1),
		3: zebra(2), // "theme" is of the family of "the": not scored
		4: zebra(1),
	}
	check := func(what string, got map[uint32]float64, exactOnes ...uint32) {
		t.Helper()
		if len(got) != 4 {
			t.Fatalf("%s: documents visited: %v; want the four with zebra", what, got)
		}
		for _, rid := range exactOnes {
			if math.Abs(got[rid]-exact[rid]) > 1e-5 {
				t.Errorf("%s: doc %d (%q): score %v, want %v", what, rid, docs[rid-1], got[rid], exact[rid])
			}
		}
		for rid, s := range got {
			if s > exact[rid]+1e-5 {
				t.Errorf("%s: doc %d scores %v, over its exact %v", what, rid, s, exact[rid])
			}
		}
	}
	// The best document is one of the short ones: doc 1, far under it,
	// need not have its common word scored.
	one := search(1, nil)
	check("want 1", one, 2, 4)
	// A caller that takes neither short document: its two best are docs 1
	// and 3, scored exactly, "the" and all.
	notShort := func(rid uint32) bool { return rid != 2 && rid != 4 }
	two := search(2, notShort)
	check("want 2 of 1 and 3", two, 1, 2, 3, 4)
	for i := range x.tms {
		x.tms[i].stale++ // the general path
	}
	if again := search(1, nil); !maps.Equal(again, one) {
		t.Fatalf("general path %v, one pass %v", again, one)
	}
	if again := search(2, notShort); !maps.Equal(again, two) {
		t.Fatalf("general path %v, one pass %v", again, two)
	}
}

// TestVisitBestKeepsTheTop: visiting the best-scored documents first (and
// the rest only while the caller lacks candidates) gives the same top k
// as visiting every touched document, whatever share of them the caller's
// filter rejects, ties on the score included.
func TestVisitBestKeepsTheTop(t *testing.T) {
	c := memorytest.NewBenchCorpus()
	x := newLexIndex()
	for i := range 5000 {
		n := c.Node()
		x.set(uint32(i+1), docText(&n))
	}
	var sc scratch
	const k = 60
	cut := 0 // queries that touched enough documents for the histogram cut
	defer func() {
		if cut < 50 {
			t.Errorf("only %d of 200 queries went through the histogram cut", cut)
		}
	}()
	for qi := range 200 {
		q := c.Query()
		if qi%7 == 0 {
			q = append(q, "the") // a common term: many equal scores
		}
		for _, rejectEvery := range []uint32{0, 2, 10, 97} {
			accept := func(rid uint32) bool { return rejectEvery == 0 || (rid*2654435761)%rejectEvery != 0 }
			run := func(more bool) []scoredItem {
				top := scoredTop{k: k}
				var m func() bool
				if more {
					m = func() bool { return len(top.items) < top.k }
				}
				var acc func(uint32) bool
				if rejectEvery != 0 {
					acc = accept // the caller's filter (it lets pruning cut on the accepted scores)
				}
				x.search(q, &sc, k, acc, m, func(rid uint32, s float64) bool {
					if more && len(top.items) == top.k && s < top.items[len(top.items)-1].score {
						return false // the stop signal Store.Lexical gives
					}
					if accept(rid) {
						// Unique ids in another order than the rids.
						top.add(scoredItem{rid: rid, id: fmt.Sprintf("n%010d", rid*2654435761), score: s})
					}
					return true
				})
				return top.items
			}
			all, best := run(false), run(true)
			if rejectEvery == 0 && len(sc.touched) > 4*k {
				cut++
			}
			if !slices.Equal(all, best) {
				t.Fatalf("query %v, rejecting 1 in %d: visiting the best first gave\n%v\nvisiting all gave\n%v", q, rejectEvery, best, all)
			}
		}
	}
}

// BenchmarkLexIndex measures the BM25 index alone (no SQLite, no
// filter) at 100,000 corpus documents and, when the -bench pattern names
// it (-bench 'LexIndex/1M'), at 1,000,000, pruned (MaxScore, as the store
// searches) and exhaustive (every unit scored in full, as before
// pruning): go test -run '^$' -bench LexIndex.
func BenchmarkLexIndex(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		name := map[int]string{100_000: "100k", 1_000_000: "1M"}[n]
		b.Run(name, func(b *testing.B) {
			if n > 100_000 && !strings.Contains(flag.Lookup("test.bench").Value.String(), name) {
				b.Skipf("indexing %d documents takes a minute and gigabytes: run with -bench 'LexIndex/%s'", n, name)
			}
			benchLex(b, n)
		})
	}
}

// BenchmarkLexInject is BenchmarkLexIndex on the corpus of engram bench
// inject (internal/inject/injectbench: its hand-written memories and
// synthetic ones from a small vocabulary, so that a query's terms hold
// tens of thousands of documents with near-equal scores), queried with
// its questions: -bench 'LexInject/100k' or 'LexInject/1M'.
func BenchmarkLexInject(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		name := map[int]string{100_000: "100k", 1_000_000: "1M"}[n]
		b.Run(name, func(b *testing.B) {
			if n > 100_000 && !strings.Contains(flag.Lookup("test.bench").Value.String(), name) {
				b.Skipf("indexing %d documents takes a minute and gigabytes: run with -bench 'LexInject/%s'", n, name)
			}
			x := newLexIndex()
			nodes := append(injectbench.SeedNodes(), injectbench.Filler(n, 1)...)
			for i := range nodes {
				x.set(uint32(i+1), docText(&nodes[i]))
			}
			var queries [][]string
			for _, q := range append(injectbench.Questions, injectbench.Rich) {
				queries = append(queries, memory.Terms(q))
			}
			benchQueries(b, x, queries)
		})
	}
}

func benchLex(b *testing.B, docs int) {
	c := memorytest.NewBenchCorpus()
	x := newLexIndex()
	start := time.Now()
	for i := range docs {
		n := c.Node()
		x.set(uint32(i+1), docText(&n))
	}
	b.Logf("indexed %d docs in %v; %d terms, %d postings", docs, time.Since(start), len(x.ids), x.live)
	queries := make([][]string, 256)
	for i := range queries {
		queries[i] = c.Query()
	}
	benchQueries(b, x, queries)
}

// benchQueries measures search on x with queries in turn, pruned and
// exhaustive.
func benchQueries(b *testing.B, x *lexIndex, queries [][]string) {
	for _, mode := range []string{"pruned", "exhaustive"} {
		b.Run(mode, func(b *testing.B) {
			x.noPrune = mode == "exhaustive"
			defer func() { x.noPrune = false }()
			var sc scratch
			var lat, cpu []time.Duration
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			pruned0 := x.pruned.Load()
			i := 0
			for b.Loop() {
				q := queries[i%len(queries)]
				i++
				c0, _ := memorytest.ThreadCPU()
				t := time.Now()
				top := scoredTop{k: memory.DefaultChannelLimit}
				x.search(q, &sc, memory.DefaultChannelLimit, nil, func() bool { return len(top.items) < top.k }, func(rid uint32, s float64) bool {
					if len(top.items) == top.k && s < top.items[len(top.items)-1].score {
						return false
					}
					top.add(scoredItem{rid: rid, score: s})
					return true
				})
				lat = append(lat, time.Since(t))
				c1, _ := memorytest.ThreadCPU()
				cpu = append(cpu, c1-c0)
			}
			slices.Sort(lat)
			slices.Sort(cpu)
			b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
			b.ReportMetric(float64(cpu[len(cpu)/2])/1e6, "cpu-p50-ms")
			b.ReportMetric(float64(cpu[len(cpu)*99/100])/1e6, "cpu-p99-ms")
			b.ReportMetric(float64(x.pruned.Load()-pruned0)/float64(i), "pruned-share")
		})
	}
}

// TestLexSearchOnePassMatchesGeneral: a query term with one list and no
// stale postings is scored in one pass; it must give the same scores, bit
// for bit, as the general pass (forced here by marking every list stale,
// which only costs the generation checks). The index has churn, so some
// lists hold stale postings and take the general pass either way, and the
// stale counts must match the postings.
func TestLexSearchOnePassMatchesGeneral(t *testing.T) {
	c := memorytest.NewBenchCorpus()
	x := newLexIndex()
	for i := range 4000 {
		n := c.Node()
		x.set(uint32(i%3000+1), docText(&n)) // the last 1,000 re-index documents
	}
	x.remove(7, nil)
	stale := 0
	for i := range x.tms {
		tm := &x.tms[i]
		name := tm.name
		n := 0
		for _, p := range tm.all(nil) {
			if p.tf == 0 {
				n++
			}
		}
		if n != tm.stale {
			t.Fatalf("term %q: %d stale postings, counted %d", name, n, tm.stale)
		}
		stale += n
	}
	if stale == 0 {
		t.Fatal("no stale postings: the test needs churn")
	}
	var sc scratch
	search := func(q []string) map[uint32]float64 {
		got := map[uint32]float64{}
		x.search(q, &sc, 0, nil, nil, func(rid uint32, s float64) bool { got[rid] = s; return true })
		return got
	}
	for range 200 {
		q := c.Query()
		onePass := search(q)
		for i := range x.tms {
			x.tms[i].stale++
		}
		general := search(q)
		for i := range x.tms {
			x.tms[i].stale--
		}
		if len(onePass) == 0 || !maps.Equal(onePass, general) {
			t.Fatalf("query %v: one pass %d docs, general %d docs, or different scores", q, len(onePass), len(general))
		}
	}
}

// TestDictionaryRunsExpandAsOne: the dictionary kept as three sorted runs
// (dict, mid, recent; see mergeRecent) expands a prefix to the same terms
// as one sorted list of the live terms would, while terms are added by
// the thousand and documents removed and compacted away.
func TestDictionaryRunsExpandAsOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	x := newLexIndex()
	syl := []string{"ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi"}
	word := func() string {
		var sb strings.Builder
		for range 2 + rng.IntN(4) {
			sb.WriteString(syl[rng.IntN(len(syl))])
		}
		return sb.String()
	}
	texts := map[uint32]string{}
	check := func(stage string) {
		t.Helper()
		var live []string
		for term, id := range x.ids {
			if x.tms[id].df > 0 {
				live = append(live, term)
			}
		}
		slices.Sort(live)
		for range 200 {
			// a prefix of a live term, of a few expansions at most (the
			// newest terms, in mid and recent, among them)
			q := live[rng.IntN(len(live))]
			q = q[:max(3, len(q)-1-rng.IntN(3))]
			var want []string
			if tm := x.term(q); tm != nil && tm.df > 0 {
				want = append(want, q)
			}
			longer := 0
			for _, term := range live {
				if term != q && strings.HasPrefix(term, q) && longer < prefixMax {
					want = append(want, term)
					longer++
				}
			}
			var got []string
			for _, tm := range x.expand(q, 0) {
				got = append(got, tm.name)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: expand(%q) = %v, want %v (runs %d / %d / %d)", stage, q, got, want, len(x.dict), len(x.mid), len(x.recent))
			}
		}
	}
	rid, midSeen := uint32(0), 0
	for round := range 12 {
		for range 3000 {
			rid++
			// two shared words and one of its own, as a memory naming its component
			texts[rid] = fmt.Sprintf("%s %s %s%d", word(), word(), word(), rid)
			x.set(rid, texts[rid])
		}
		check(fmt.Sprintf("round %d", round))
		if len(x.mid) > 0 {
			midSeen++
		}
		if round%4 == 1 {
			x.mergeRecent() // recent empty, mid not (unless it went to dict)
			check(fmt.Sprintf("round %d, recent merged", round))
		}
		for r := range texts {
			if rng.IntN(4) == 0 {
				x.remove(r, nil)
				delete(texts, r)
			}
		}
		if round%3 == 2 {
			x.compact()
			check(fmt.Sprintf("round %d, compacted", round))
		}
	}
	if midSeen < 3 || len(x.dict) == 0 {
		t.Errorf("the runs were not all used: mid held terms at %d checks of 12; dict %d terms", midSeen, len(x.dict))
	}
}
