package eval_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/eval"
	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm/hashembed"
)

// devSet is the development set beside the repository (../shared in CI).
func devSet(t testing.TB) string {
	dir := filepath.Join("..", "..", "..", "shared", "eval", "longmemeval-dev")
	if _, err := os.Stat(filepath.Join(dir, "questions.jsonl")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the development set is missing at %s (CI has ../shared): %v", dir, err)
		}
		t.Skipf("the development set is not at %s", dir)
	}
	return dir
}

func runDev(t testing.TB, sample int) eval.Result {
	dir := devSet(t)
	qf, err := os.Open(filepath.Join(dir, "questions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer qf.Close()
	qs, err := eval.ReadQuestions(qf)
	if err != nil {
		t.Fatal(err)
	}
	qs = eval.Sample(qs, sample)
	gf, err := os.Open(filepath.Join(dir, "graph.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer gf.Close()
	st := storetest.OpenSQLite(t)
	emb := hashembed.New(0)
	ctx := context.Background()
	load, err := eval.Load(ctx, st.(eval.Store), emb, gf, qs)
	if err != nil {
		t.Fatal(err)
	}
	r, err := eval.Run(ctx, eval.Setup{Store: st.(eval.Store), Embedder: emb, Inject: inject.Defaults()}, qs)
	if err != nil {
		t.Fatal(err)
	}
	r.Load = load
	return r
}

// The regression guard: a fixed slice of the development set (20
// questions spread over every category, about 5,000 nodes, SQLite and the
// built-in embedder, as `engram eval -sample 20` runs it) must keep the
// ranker's recall@10 and the block's recall above floors set a little
// under what was measured when the ranker was tuned. It guards against
// regressions; the targets are measured on the whole set.
func TestDevSliceRegression(t *testing.T) {
	const (
		rankerR10Floor   = 0.80 // measured 0.850 (BM25 0.738; 0.825 before the exact-word lexical channel)
		blockRecallFloor = 0.70 // measured 0.708 (0.725 before the exact-word lexical channel, 0.683 at the start of session 14)
	)
	r := runDev(t, 20)
	var out strings.Builder
	eval.WriteText(&out, r)
	t.Logf("development slice:\n%s", out.String())
	if r.Overall.N != 20 {
		t.Fatalf("asked %d questions, want 20", r.Overall.N)
	}
	if got := r.Overall.Ranker.R10; got < rankerR10Floor {
		t.Errorf("ranker recall@10 = %.3f, under the floor %.3f", got, rankerR10Floor)
	}
	if got := r.Overall.Block.Recall; got < blockRecallFloor {
		t.Errorf("block recall = %.3f, under the floor %.3f", got, blockRecallFloor)
	}
	if got, bm := r.Overall.Ranker.R10, r.Overall.BM25.R10; got < bm {
		t.Errorf("ranker recall@10 = %.3f, under plain BM25's %.3f over the same nodes", got, bm)
	}
	if r.Overall.Block.Empty > 0 {
		t.Errorf("%.0f%% of the blocks are empty", 100*r.Overall.Block.Empty)
	}
}
