package sqlite

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
)

// TestDenseCopyIsTheList: the terms most documents hold keep a dense copy
// of their list (dense.go) that holds, after writes out of rid order,
// re-indexed and removed documents, an erasure (removeAll) and a
// compaction, each live posting's frequency and nothing else; and an index
// whose common terms are kept dense answers every query as one without
// them, documents and scores bit for bit, plain and packed in blocks.
func TestDenseCopyIsTheList(t *testing.T) {
	for _, pack := range []bool{false, true} {
		t.Run(fmt.Sprintf("packed=%v", pack), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(21, 22))
			c := memorytest.NewBenchCorpus()
			dense, plain := newLexIndex(), newLexIndex()
			dense.denseFrom, plain.denseFrom = 200, 1<<30
			dense.forcePack, plain.forcePack = pack, pack
			vocab := make([]string, 300)
			for i := range vocab {
				vocab[i] = fmt.Sprintf("w%s%d", strings.Repeat("q", i%3), i)
			}
			vocab = append(vocab, "the", "them", "of", "offer", "in")
			word := func() string {
				if rng.IntN(4) == 0 {
					return vocab[len(vocab)-1-rng.IntN(5)] // common
				}
				return vocab[int(float64(len(vocab))*rng.Float64()*rng.Float64())]
			}
			live := map[uint32]string{}
			both := func(f func(x *lexIndex)) { f(dense); f(plain) }
			set := func(r uint32) {
				text := mixedText(rng, c, word, 25)
				if old, ok := live[r]; ok && rng.IntN(2) == 0 {
					both(func(x *lexIndex) { x.reset(r, text, old) })
				} else {
					both(func(x *lexIndex) { x.set(r, text) })
				}
				live[r] = text
			}
			const docs = 3000
			for _, r := range rng.Perm(docs) {
				set(uint32(r + 1))
			}
			check := func(when string) {
				t.Helper()
				kept := 0
				for i := range dense.tms {
					tm := &dense.tms[i]
					if !tm.dense {
						continue
					}
					kept++
					want := map[uint32]uint16{}
					for _, p := range tm.all(nil) {
						if p.tf != 0 {
							want[p.rid] = p.tf
						}
					}
					got := 0
					for rid, tf := range dense.dense[tm.id] {
						if tf != 0 {
							got++
							if want[uint32(rid)] != tf {
								t.Fatalf("%s: term %q: the copy has tf %d for document %d, the list %d", when, tm.name, tf, rid, want[uint32(rid)])
							}
						}
					}
					if got != len(want) || got != tm.df {
						t.Fatalf("%s: term %q: the copy holds %d documents, the list %d, df %d", when, tm.name, got, len(want), tm.df)
					}
				}
				if kept == 0 || kept != len(dense.dense) {
					t.Fatalf("%s: %d terms kept dense, %d copies: the test needs some", when, kept, len(dense.dense))
				}
				var dsc, psc scratch
				for range 60 {
					var q []string
					for range 1 + rng.IntN(5) {
						q = append(q, word())
					}
					q = memory.Terms(strings.Join(q, " "))
					k := []int{1, 5, 20, 60}[rng.IntN(4)]
					var accept func(uint32) bool
					if every := []uint32{0, 2, 7}[rng.IntN(3)]; every > 0 {
						accept = func(rid uint32) bool { return (rid*2654435761)%every != 0 }
					}
					got, want := topOf(dense, &dsc, q, k, accept), topOf(plain, &psc, q, k, accept)
					if !slices.Equal(got, want) {
						t.Fatalf("%s: query %v k %d:\ndense %v\nplain %v", when, q, k, got, want)
					}
				}
			}
			check("written")
			for range docs / 3 { // churn: re-index and remove
				r := uint32(rng.IntN(docs+100) + 1)
				if rng.IntN(3) == 0 {
					both(func(x *lexIndex) { x.remove(r, nil) })
					delete(live, r)
				} else {
					set(r)
				}
			}
			check("churned")
			var gone []uint32
			for r := range live {
				if rng.IntN(10) == 0 {
					gone = append(gone, r)
				}
			}
			both(func(x *lexIndex) { x.removeAll(gone) })
			for _, r := range gone {
				delete(live, r)
			}
			check("erased")
			both(func(x *lexIndex) { x.compact() })
			check("compacted")
		})
	}
}

// TestDenseAnswersAsListsDev: on real conversations (the development sets'
// memories, all in one index; ENGRAM_TEST_DENSE_DEV names engram eval's
// DIRs separated by the path list separator, LoCoMo-dev by default), an
// index keeping its commonest terms dense from 200 documents on answers
// each question's words as one without copies, documents and scores bit
// for bit.
func TestDenseAnswersAsListsDev(t *testing.T) {
	dirs := filepath.SplitList(os.Getenv("ENGRAM_TEST_DENSE_DEV"))
	if len(dirs) == 0 {
		dirs = []string{"../../../../shared/eval/locomo-dev"}
	}
	for _, dir := range dirs {
		f, err := os.Open(filepath.Join(dir, "graph.jsonl.gz"))
		if err != nil {
			t.Skipf("no evaluation graph: %v", err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		dense, plain := newLexIndex(), newLexIndex()
		dense.denseFrom, plain.denseFrom = 200, 1<<30
		sc := bufio.NewScanner(zr)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		rid := uint32(0)
		for sc.Scan() {
			var n memory.Node
			var kind struct{ Type string }
			if json.Unmarshal(sc.Bytes(), &kind) != nil || kind.Type != "node" || json.Unmarshal(sc.Bytes(), &n) != nil {
				continue
			}
			rid++
			text := docText(&n)
			dense.set(rid, text)
			plain.set(rid, text)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if len(dense.dense) == 0 {
			t.Fatalf("%s: %d memories, no term kept dense", dir, rid)
		}
		qf, err := os.ReadFile(filepath.Join(dir, "questions.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var dsc, psc scratch
		n := 0
		for line := range strings.Lines(string(qf)) {
			var q struct{ Question string }
			if json.Unmarshal([]byte(line), &q) != nil || q.Question == "" {
				continue
			}
			terms := memory.Terms(q.Question)
			got, want := topOf(dense, &dsc, terms, memory.DefaultChannelLimit, nil), topOf(plain, &psc, terms, memory.DefaultChannelLimit, nil)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: %q:\ndense %v\nplain %v", dir, q.Question, got, want)
			}
			n++
		}
		t.Logf("%s: %d memories, %d terms kept dense, %d questions answered alike", dir, rid, len(dense.dense), n)
		if n == 0 {
			t.Fatalf("%s: no question", dir)
		}
	}
}
