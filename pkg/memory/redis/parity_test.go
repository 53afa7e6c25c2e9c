package redis_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/eval"
	"github.com/engram-memory/engram/internal/memio"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// TestLexicalParityDev compares the lexical channel with the SQLite
// store's on real conversations. ENGRAM_TEST_LEXICAL_PARITY names
// evaluation sets (engram eval's DIRs, separated by the path list
// separator, e.g. ../shared/eval/locomo-dev:../shared/eval/longmemeval-dev);
// each question's project is imported alone into a store of each
// backend, and the top 10 of the question's words (memory.Terms) are
// compared: how many questions have the same ten documents in the same
// order, and how many of their documents the two share, with the read
// budget and without it.
func TestLexicalParityDev(t *testing.T) {
	dirs := filepath.SplitList(os.Getenv("ENGRAM_TEST_LEXICAL_PARITY"))
	if len(dirs) == 0 {
		t.Skip("set ENGRAM_TEST_LEXICAL_PARITY to evaluation sets (engram eval's DIRs) to compare with the SQLite store")
	}
	ctx := t.Context()
	c := testClient(t)
	for _, dir := range dirs {
		qf, err := os.Open(filepath.Join(dir, "questions.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		qs, err := eval.ReadQuestions(qf)
		qf.Close()
		if err != nil {
			t.Fatal(err)
		}
		gf, err := os.Open(filepath.Join(dir, "graph.jsonl.gz"))
		if err != nil {
			t.Fatal(err)
		}
		var graph bytes.Buffer
		_, err = eval.FilterGraph(gf, &graph, eval.Projects(qs))
		gf.Close()
		if err != nil {
			t.Fatal(err)
		}
		type pair struct {
			lite *sqlite.Store
			rs   *redis.Store
		}
		stores := map[string]pair{}
		var same, sameExact, shared, sharedExact, n int
		for _, q := range qs {
			p, ok := stores[q.Project]
			if !ok {
				var one bytes.Buffer
				if _, err := eval.FilterGraph(bytes.NewReader(graph.Bytes()), &one, map[string]bool{q.Project: true}); err != nil {
					t.Fatal(err)
				}
				if p.lite, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "m.db")); err != nil {
					t.Fatal(err)
				}
				defer p.lite.Close()
				p.rs = openStore(t, c)
				for _, st := range []memio.Store{p.lite, p.rs} {
					if _, err := memio.Import(ctx, st, bytes.NewReader(one.Bytes()), "", time.Now()); err != nil {
						t.Fatal(err)
					}
				}
				stores[q.Project] = p
			}
			terms := memory.Terms(q.Question)
			f := memory.Filter{ProjectID: q.Project}
			want, err := p.lite.Lexical(ctx, terms, f, 60)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.rs.Lexical(ctx, terms, f, 60)
			if err != nil {
				t.Fatal(err)
			}
			redis.SetLexicalBudget(p.rs, 1<<30, 1<<30)
			exact, err := p.rs.Lexical(ctx, terms, f, 60)
			redis.SetLexicalBudget(p.rs, redis.DefaultLexicalBudget, redis.DefaultLexicalMinPerTerm)
			if err != nil {
				t.Fatal(err)
			}
			n++
			s, o := compareTop(got, want, 10)
			same, shared = same+s, shared+o
			s, o = compareTop(exact, want, 10)
			sameExact, sharedExact = sameExact+s, sharedExact+o
			if s == 0 && os.Getenv("ENGRAM_TEST_LEXICAL_PARITY_V") != "" {
				t.Logf("%q %v\n redis  %v\n sqlite %v", q.Question, terms, top(exact, 10), top(want, 10))
			}
		}
		msg := fmt.Sprintf("%s: %d questions; top 10 identical: %d with the read budget, %d without; documents shared: %.1f%% / %.1f%%",
			filepath.Base(dir), n, same, sameExact, 100*float64(shared)/float64(10*n), 100*float64(sharedExact)/float64(10*n))
		t.Log(msg)
		fmt.Fprintln(os.Stderr, "lexical parity:", msg)
		// Read whole, every list is exact: the same ranking as SQLite's.
		// Under the budget a common word's list is read in part (a
		// candidate past the leaders lacks its unread postings, a group's
		// document count is an upper bound), which reorders near ties.
		if sameExact != n {
			t.Errorf("%s: %d of %d top 10 differ from the SQLite store's without the read budget", filepath.Base(dir), n-sameExact, n)
		}
		if share := float64(shared) / float64(10*n); share < 0.98 {
			t.Errorf("%s: with the read budget the top 10 share %.1f%% of the SQLite store's documents, want at least 98%%", filepath.Base(dir), 100*share)
		}
	}
}

// compareTop reports whether the first k of got and want are the same
// documents in the same order with the same scores (to 1e-4 relative:
// SQLite sums in float32), and how many documents they share.
func compareTop(got, want []memory.Scored, k int) (same, shared int) {
	g, w := got[:min(k, len(got))], want[:min(k, len(want))]
	in := map[string]bool{}
	for _, s := range w {
		in[s.ID] = true
	}
	for _, s := range g {
		if in[s.ID] {
			shared++
		}
	}
	if len(g) != len(w) {
		return 0, shared
	}
	for i := range g {
		if g[i].ID != w[i].ID || math.Abs(g[i].Score-w[i].Score) > 1e-4*math.Abs(w[i].Score) {
			return 0, shared
		}
	}
	return 1, shared
}

func top(sc []memory.Scored, k int) []string {
	var out []string
	for _, s := range sc[:min(k, len(sc))] {
		out = append(out, fmt.Sprintf("%s:%.3f", s.ID, s.Score))
	}
	return out
}
