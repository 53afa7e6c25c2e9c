package redis_test

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestLexicalQuality measures what the lexical channel's posting budget
// costs in quality on natural text: 40,000 distinct comment paragraphs of
// the Go distribution's sources as memories, 200 nine-word spans of them
// as queries (common and rare words mixed, as in a question), each ranked
// by the budgeted channel and by exact BM25 (every posting read). Per
// query: the exact score mass of the budgeted top 10 against exact's, and
// how many of exact's top 10 and top 24 (the hits the injector asks for)
// the budgeted channel returns. It runs with ENGRAM_BENCH_LARGE=1 (the
// load takes about half a minute):
//
//	ENGRAM_BENCH_LARGE=1 go test -run TestLexicalQuality -v ./pkg/memory/redis
func TestLexicalQuality(t *testing.T) {
	if os.Getenv("ENGRAM_BENCH_LARGE") == "" {
		t.Skip("set ENGRAM_BENCH_LARGE=1 to run the natural-text quality measurement")
	}
	c := testClient(t)
	ctx := context.Background()
	paras := goParagraphs(t, 40000)
	s := openStore(t, c)
	const project = "quality"
	var batch []memory.Node
	for i, p := range paras {
		label, body := p, ""
		if j := strings.Index(p, ". "); j > 0 && j < 120 {
			label, body = p[:j+1], p[j+2:]
		}
		batch = append(batch, memory.Node{ID: fmt.Sprintf("q%06d", i), Subkind: memory.Observation,
			Scope: memory.ScopeProject, ProjectID: project, Label: label, Body: body, Confidence: 0.8,
			AssertedBy: memory.AssertedInferred, Source: memory.SourceAgent, Reach: memory.ReachHere, Weight: 1})
		if len(batch) == 500 || i == len(paras)-1 {
			if err := s.PutBatch(ctx, batch, nil); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	exact, err := redis.New(c, redis.WithNamespace(redis.Namespace(s)))
	if err != nil {
		t.Fatal(err)
	}
	redis.SetLexicalBudget(exact, 1<<30, 1<<30)

	f := memory.Filter{ProjectID: project, SessionID: "s", MinConfidence: 0.3}
	var mass10, rec10, rec24, reads, n float64
	for i := 7; i < len(paras) && n < 200; i += len(paras) / 200 {
		words := strings.Fields(paras[i])
		from := min(len(words)/3, max(0, len(words)-9))
		terms := memory.Terms(strings.Join(words[from:min(len(words), from+9)], " "))
		got, err := s.Lexical(ctx, terms, f, 60)
		if err != nil {
			t.Fatal(err)
		}
		want, err := exact.Lexical(ctx, terms, f, 60)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			continue
		}
		score := make(map[string]float64, len(want))
		for _, w := range want {
			score[w.ID] = w.Score
		}
		// A budgeted top-10 hit outside exact's top 60 scores at most the
		// 60th: counting it as that overstates the mass a little.
		floor := want[len(want)-1].Score
		massOf := func(l []memory.Scored) float64 {
			m := 0.0
			for _, h := range l[:min(10, len(l))] {
				if v, ok := score[h.ID]; ok {
					m += v
				} else {
					m += floor
				}
			}
			return m
		}
		mass10 += massOf(got) / massOf(want)
		rec10 += overlap(got, want, 10)
		rec24 += overlap(got, want, 24)
		r, err := redis.PlannedReads(ctx, s, f, terms, 60)
		if err != nil {
			t.Fatal(err)
		}
		reads += float64(r)
		n++
	}
	mass10, rec10, rec24, reads = mass10/n, rec10/n, rec24/n, reads/n
	t.Logf("%d paragraphs, %.0f queries: postings read %.0f per query; top-10 score mass %.3f of exact, top 10 %.3f, top 24 %.3f",
		len(paras), n, reads, mass10, rec10, rec24)
	// 2026-11-30: the cube-weighted plan at a budget of 800 read 1,117
	// postings per query for 0.984 / 0.847 / 0.776; the even split it
	// replaced read 1,242 at a budget of 1,200 for 0.983 / 0.844 / 0.774,
	// and 1,024 at 800 for 0.983 / 0.843 / 0.762.
	if mass10 < 0.95 || rec10 < 0.80 || rec24 < 0.74 {
		t.Errorf("the budgeted lexical channel fell below 0.95 / 0.80 / 0.74 of exact BM25")
	}
}

// overlap is the share of want's first k that got's first k holds.
func overlap(got, want []memory.Scored, k int) float64 {
	want = want[:min(k, len(want))]
	hit := 0
	for _, g := range got[:min(k, len(got))] {
		if slices.ContainsFunc(want, func(w memory.Scored) bool { return w.ID == g.ID }) {
			hit++
		}
	}
	return float64(hit) / float64(len(want))
}

// goParagraphs returns up to max distinct comment paragraphs (60 to 500
// characters) of the Go distribution's non-test sources, in file order.
func goParagraphs(t *testing.T, max int) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	root := filepath.Join(strings.TrimSpace(string(out)), "src")
	var files []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor"):
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go"):
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	var paras []string
	seen := map[string]bool{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		var cur []string
		flush := func() {
			p := strings.Join(cur, " ")
			cur = cur[:0]
			key := strings.ToLower(strings.Join(strings.Fields(p), " "))
			if len(p) >= 60 && len(p) <= 500 && !strings.Contains(p, "Copyright") && !seen[key] {
				seen[key] = true
				paras = append(paras, p)
			}
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			l := strings.TrimSpace(sc.Text())
			switch {
			case strings.HasPrefix(l, "//go:"):
			case strings.HasPrefix(l, "//"):
				if l = strings.TrimSpace(l[2:]); l == "" {
					flush()
				} else {
					cur = append(cur, l)
				}
			case len(cur) > 0:
				flush()
			}
		}
		fh.Close()
		if len(paras) >= max {
			break
		}
	}
	if len(paras) < max {
		t.Fatalf("only %d paragraphs under %s", len(paras), root)
	}
	return paras[:max]
}
