package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
)

// TestLongMemoriesPackedAnswerAsPlain: a store of long memories (hundreds
// of distinct terms each, as whole sessions are) packs its posting lists in
// blocks, and its lexical answers, after writes, re-indexed memories
// (their terms derived from the text they replace),
// erasure and a reopen (the load), are those of a plain index of the
// memories it holds, documents and scores bit for bit.
func TestLongMemoriesPackedAnswerAsPlain(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 12))
	vocab := make([]string, 4000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("v%s%d", strings.Repeat("x", i%4), i)
	}
	word := func() string { return vocab[int(float64(len(vocab))*rng.Float64()*rng.Float64()*rng.Float64())] }
	body := func() string {
		var sb strings.Builder
		for range 500 + rng.IntN(700) {
			sb.WriteString(word())
			sb.WriteByte(' ')
		}
		return sb.String()
	}
	node := func(i int) memory.Node {
		session := "keep"
		if i%6 == 0 {
			session = "gone"
		}
		n := memory.Node{ID: fmt.Sprintf("m%04d", i), Subkind: memory.Observation, Scope: memory.ScopeProject,
			ProjectID: "p", SessionID: session, Label: fmt.Sprintf("memory %d", i), Body: body()}
		if i%3 == 0 {
			n.AssertedBy = memory.AssertedUser // a standing-instruction candidate: the background load reads it first, then again
		}
		return n
	}
	path := filepath.Join(t.TempDir(), "engram.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []memory.Node
	for i := range 600 {
		nodes = append(nodes, node(i))
	}
	for i := 0; i < len(nodes); i += 100 {
		if err := s.PutBatch(ctx, nodes[i:i+100], nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 90 { // re-indexed: the old postings go stale in their blocks
		b := body()
		if _, err := s.Update(ctx, nodes[rng.IntN(len(nodes))].ID, memory.Patch{Body: &b}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Erase(ctx, memory.EraseScope{Project: "p", Session: "gone"}, nil); err != nil {
		t.Fatal(err)
	}
	if n := s.idx.lex.scanned.Load(); n != 0 {
		t.Fatalf("%d re-indexed memories were looked up in every list: the writes' previous texts were not used", n)
	}
	queries := make([][]string, 80)
	for i := range queries {
		var q []string
		for range 1 + rng.IntN(6) {
			q = append(q, word())
		}
		queries[i] = memory.Terms(strings.Join(q, " "))
	}
	check := func(s *Store, when string) {
		t.Helper()
		x := s.idx
		x.mu.RLock()
		defer x.mu.RUnlock()
		blocks := 0
		for i := range x.lex.tms {
			blocks += x.lex.tms[i].nblocks()
		}
		if !x.lex.packing() || blocks == 0 {
			t.Fatalf("%s: long memories, and the lists are not packed (packing %v, %d blocks)", when, x.lex.packing(), blocks)
		}
		if when != "written" {
			// The load copies every list once it is done (trim): the
			// copies are exact; lists left where the load grew them would
			// keep their spans among the load's garbage.
			for i := range x.lex.tms {
				tm := &x.lex.tms[i]
				if cap(tm.rids) != len(tm.rids) || cap(tm.tfs) != len(tm.tfs) ||
					(tm.bl != nil && (cap(tm.bl.data) != len(tm.bl.data) || cap(tm.bl.skip) != len(tm.bl.skip))) {
					t.Fatalf("%s: term %q kept the load's list (spare capacity)", when, tm.name)
				}
			}
			if n := len(x.lex.tms); cap(x.lex.tms)-n > n/8 {
				t.Fatalf("%s: the term table keeps %d spare entries beside %d", when, cap(x.lex.tms)-n, n)
			}
		}
		plain := newLexIndex()
		plain.noPack = true
		live := 0
		if err := s.Scan(ctx, func(n memory.Node) error {
			if rid, ok := x.byID[n.ID]; ok {
				plain.set(rid, docText(&n))
				live++
			}
			return nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		if live != x.lex.nDocs || live == 0 {
			t.Fatalf("%s: %d memories scanned, the index holds %d", when, live, x.lex.nDocs)
		}
		var sc, psc scratch
		for _, q := range queries {
			for _, k := range []int{5, 20, 60} {
				got, want := topOf(x.lex, &sc, q, k, nil), topOf(plain, &psc, q, k, nil)
				if len(want) == 0 || !slices.Equal(got, want) {
					t.Fatalf("%s: query %v k %d:\npacked %v\nplain  %v", when, q, k, got, want)
				}
			}
		}
	}
	check(s, "written")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	check(s, "reopened")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// As serve opens it: loaded in the background, the standing
	// candidates first and then again with their project; the second time
	// re-derives their terms from the row itself, without searching every
	// list under the write lock.
	s, err = Open(ctx, path, WithBackgroundLoad())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.idx.lex.scanned.Load(); n != 0 {
		t.Fatalf("background load: %d memories looked up in every list", n)
	}
	check(s, "loaded in the background")
}
