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

// TestLexicalParityDev: on real conversations the lexical channel ranks as
// the SQLite store's does. ENGRAM_TEST_LEXICAL_PARITY names an evaluation
// set (engram eval's DIR, e.g. ../shared/eval/longmemeval-dev); each
// question's project is imported alone into a store of each backend (the
// SQLite store's BM25 statistics are the whole store's, the Redis store's
// the project's: with one project they agree). For every
// question the two top 20 of memory.LexicalTerms(question) must be the
// same documents in the same order with the same scores (to 1e-5: SQLite
// sums in float32), read without the read budget; with it, how many are
// the same is printed. About 2 minutes for the 100 development questions.
func TestLexicalParityDev(t *testing.T) {
	dir := os.Getenv("ENGRAM_TEST_LEXICAL_PARITY")
	if dir == "" {
		t.Skip("set ENGRAM_TEST_LEXICAL_PARITY to an evaluation set (engram eval's DIR) to compare with the SQLite store")
	}
	ctx := t.Context()
	qf, err := os.Open(filepath.Join(dir, "questions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer qf.Close()
	qs, err := eval.ReadQuestions(qf)
	if err != nil {
		t.Fatal(err)
	}
	gpath := filepath.Join(dir, "graph.jsonl.gz")
	if _, err := os.Stat(gpath); err != nil {
		gpath = filepath.Join(dir, "graph.jsonl")
	}
	gf, err := os.Open(gpath)
	if err != nil {
		t.Fatal(err)
	}
	defer gf.Close()
	var graph bytes.Buffer
	if _, err := eval.FilterGraph(gf, &graph, eval.Projects(qs)); err != nil {
		t.Fatal(err)
	}
	c := testClient(t)
	type pair struct {
		lite *sqlite.Store
		rs   *redis.Store
	}
	stores := map[string]pair{}
	budget, minPer := 0, 0
	budgeted := 0
	for i, q := range qs {
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
			budget, minPer = redis.LexicalBudget(p.rs)
			for _, st := range []memio.Store{p.lite, p.rs} {
				if _, err := memio.Import(ctx, st, bytes.NewReader(one.Bytes()), "", time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			stores[q.Project] = p
		}
		lite, rs := p.lite, p.rs
		terms := memory.LexicalTerms(q.Question)
		f := memory.Filter{ProjectID: q.Project}
		want, err := lite.Lexical(ctx, terms, f, 20)
		if err != nil {
			t.Fatal(err)
		}
		redis.SetLexicalBudget(rs, 1_000_000, 1_000_000)
		got, err := rs.Lexical(ctx, terms, f, 20)
		if err != nil {
			t.Fatal(err)
		}
		if !sameScored(got, want) {
			t.Errorf("question %d %v:\nredis  %v\nsqlite %v", i, terms, got, want)
		}
		redis.SetLexicalBudget(rs, budget, minPer)
		if got, err = rs.Lexical(ctx, terms, f, 20); err != nil {
			t.Fatal(err)
		}
		if sameScored(got, want) {
			budgeted++
		}
	}
	// Under the read budget a long list is read in part and a leader's small
	// contributions from it may be left out (see completeLeaders).
	fmt.Fprintf(os.Stderr, "lexical parity: %d questions over %d projects; with the default read budget %d identical\n",
		len(qs), len(stores), budgeted)
}

// sameScored: the same documents in the same order, scores to 1e-5.
func sameScored(got, want []memory.Scored) bool {
	if len(got) != len(want) {
		return false
	}
	for j := range got {
		if got[j].ID != want[j].ID || math.Abs(got[j].Score-want[j].Score) > 1e-5*math.Abs(want[j].Score) {
			return false
		}
	}
	return true
}
