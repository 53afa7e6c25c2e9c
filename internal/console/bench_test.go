package console_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/console"
	"github.com/engram-memory/engram/internal/mcptool"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm/hashembed"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestPageTimes100k measures, in the browser, how long the memories page
// and a memory's page take for a project of 100,000 memories (with 2
// edges each and their vectors): the navigation's time from request to
// response end (the server's render and the transfer) and to
// DOMContentLoaded, p50 and p99 over repeated loads. A benchmark-style
// run for the docs, not an assertion: ENGRAM_CONSOLE_BENCH=1 runs it
// (ENGRAM_CONSOLE_BENCH_N sets the memories, ENGRAM_CONSOLE_BENCH_LOADS
// the loads per page).
func TestPageTimes100k(t *testing.T) {
	if os.Getenv("ENGRAM_CONSOLE_BENCH") == "" {
		t.Skip("a measurement for docs/console.md: ENGRAM_CONSOLE_BENCH=1")
	}
	n := envInt("ENGRAM_CONSOLE_BENCH_N", 100_000)
	loads := envInt("ENGRAM_CONSOLE_BENCH_LOADS", 200)
	ctx := timeout(t, 30*time.Minute)
	st := storetest.OpenSQLite(t)
	emb := hashembed.New(256)
	t0 := time.Now()
	ids := seedMany(t, ctx, st, emb, n)
	t.Logf("seeded %d memories in %v", n, time.Since(t0).Round(time.Millisecond))
	tool, err := mcptool.New(st, emb, mcptool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := mcptool.LoadTokens(writeTokens(t))
	if err != nil {
		t.Fatal(err)
	}
	rk := memory.LexicalEmbedderRanking
	srv, err := console.New(console.Deps{Store: st, Tool: tool, Embedder: emb, Tokens: tokens, AdminToken: adminTok,
		Search: console.Search{Ranking: &rk}}, console.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	b := &tab{t: t, ctx: browser(t, ctx), url: hs.URL, dir: t.TempDir()}
	b.login(tokShop)
	rng := rand.New(rand.NewPCG(1, 2))
	pages := []struct {
		name string
		path func() string
	}{
		{"memories (newest 50)", func() string { return "/memories?p=shop" }},
		{"memories, page 20", func() string { return "/memories?p=shop&page=20" }},
		{"memories, asserted by user", func() string { return "/memories?p=shop&authority=user" }},
		{"memories, search", func() string { return "/memories?p=shop&q=" + strconv.Itoa(rng.IntN(n)) + "+deploy+service" }},
		{"a memory's page", func() string { return "/memory/" + ids[rng.IntN(len(ids))] + "?p=shop" }},
	}
	for _, pg := range pages {
		var server, dom []float64
		for range loads {
			b.open(pg.path())
			v := b.eval(`(() => { const e = performance.getEntriesByType("navigation")[0];
				return (e.responseEnd - e.requestStart).toFixed(2) + " " + (e.domContentLoadedEventEnd - e.startTime).toFixed(2); })()`)
			var s, d float64
			if _, err := fmt.Sscanf(v, "%f %f", &s, &d); err != nil {
				t.Fatalf("timing %q: %v", v, err)
			}
			server, dom = append(server, s), append(dom, d)
		}
		t.Logf("%-28s request→response end p50 %6.1f ms p99 %6.1f ms · to DOMContentLoaded p50 %6.1f ms p99 %6.1f ms (%d loads)",
			pg.name, pct(server, 50), pct(server, 99), pct(dom, 50), pct(dom, 99), loads)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func pct(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// seedMany writes n memories of project shop (a tenth asserted by the
// user, a twentieth archived) with their vectors and two edges each.
func seedMany(t *testing.T, ctx context.Context, st memory.Store, emb *hashembed.Embedder, n int) []string {
	t.Helper()
	words := []string{"deploy", "service", "payment", "checkout", "database", "migration", "cache", "queue", "retry", "timeout",
		"customer", "invoice", "report", "search", "index", "token", "session", "backup", "alert", "metric"}
	kinds := []memory.Subkind{memory.Decision, memory.Pattern, memory.Observation, memory.Preference, memory.Failure}
	ids := make([]string, n)
	const batch = 5000
	base := time.Now().Add(-time.Duration(n) * time.Minute)
	for from := 0; from < n; from += batch {
		to := min(from+batch, n)
		nodes := make([]memory.Node, 0, to-from)
		texts := make([]string, 0, to-from)
		for i := from; i < to; i++ {
			ids[i] = memory.NewID()
			label := fmt.Sprintf("%s %s %s note %d", words[i%20], words[(i/20)%20], words[(i/400)%20], i)
			nd := memory.Node{ID: ids[i], Subkind: kinds[i%5], Scope: memory.ScopeProject, ProjectID: "shop", Label: label,
				Body: "Recorded while working on the " + words[(i*7)%20] + " of the shop.", Source: memory.SourceAgent,
				AssertedBy: memory.AssertedInferred, Confidence: 0.7, CreatedAt: base.Add(time.Duration(i) * time.Minute),
				UpdatedAt: base.Add(time.Duration(i) * time.Minute)}
			if i%10 == 0 {
				nd.AssertedBy = memory.AssertedUser
			}
			if i%20 == 0 {
				nd.ArchivedAt = nd.UpdatedAt
			}
			nodes = append(nodes, nd)
			texts = append(texts, memory.EmbedText(&nd))
		}
		vecs, err := emb.Embed(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		var edges []memory.Edge
		for k := range nodes {
			nodes[k].Embedding, nodes[k].EmbeddingModel = vecs[k], emb.Model()
			if i := from + k; i > 1 {
				edges = append(edges, memory.Edge{Src: ids[i], Dst: ids[i-1], Relation: memory.RelatesTo},
					memory.Edge{Src: ids[i], Dst: ids[i/2], Relation: memory.CausedBy})
			}
		}
		if err := st.PutBatch(ctx, nodes, edges); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}
