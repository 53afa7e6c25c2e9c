package redis_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// Postings written before the label weighed twice (lexical index version
// 1) are rewritten by EnsureLexicalIndex, once: afterwards the lexical
// channel scores exactly as over a store written by this version, the
// corpus statistics agree, and a second run rewrites nothing. A project
// registered by this version starts current.
func TestEnsureLexicalIndexMigratesVersion1(t *testing.T) {
	c := testClient(t)
	old, fresh := openStore(t, c), openStore(t, c)
	ctx := t.Context()
	words := []string{"kettle", "garden", "rafting", "oregon", "ukulele", "guitar", "amp", "lessons", "jam", "market"}
	var nodes []memory.Node
	for i := range 40 {
		project := []string{"p", "q", ""}[i%3]
		n := memory.Node{Subkind: memory.Observation, Scope: memory.ScopeProject, ProjectID: project, Confidence: 0.9,
			Label: fmt.Sprintf("%s and %s", words[i%len(words)], words[(i*3+1)%len(words)]),
			Body:  fmt.Sprintf("note %d about %s, %s and %s", i, words[(i+2)%len(words)], words[(i*7)%len(words)], words[i%len(words)])}
		if project == "" {
			n.Scope = memory.ScopeGlobal
		}
		nodes = append(nodes, n)
	}
	redis.WithLabelRepeats(1, func() {
		for _, n := range nodes {
			if _, err := old.Upsert(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
	})
	for _, n := range nodes {
		if _, err := fresh.Upsert(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	// The old store's scopes say nothing of a version: written before it.
	for _, p := range []string{"p", "q", ""} {
		if err := c.HDel(ctx, redis.StatsKey(old, p), "v").Err(); err != nil {
			t.Fatal(err)
		}
	}
	type ranked struct {
		ids    []string
		scores []float64
	}
	lexical := func(s *redis.Store, project string, terms ...string) ranked {
		t.Helper()
		hits, err := s.Lexical(ctx, terms, memory.Filter{ProjectID: project}, 100) // all: no tie cut at the limit
		if err != nil {
			t.Fatal(err)
		}
		var r ranked
		for _, h := range hits {
			n, err := s.Get(ctx, h.ID)
			if err != nil {
				t.Fatal(err)
			}
			// Ids differ between the stores (so ties order differently);
			// texts do not.
			r.ids = append(r.ids, fmt.Sprintf("%.9f %s|%s", h.Score, n.Label, n.Body))
			r.scores = append(r.scores, h.Score)
		}
		slices.Sort(r.ids)
		return r
	}
	queries := [][]string{{"kettle"}, {"garden", "market"}, {"ukulele", "lessons"}, {"note", "jam"}}
	same := func() bool {
		for _, p := range []string{"p", "q", ""} {
			for _, q := range queries {
				a, b := lexical(old, p, q...), lexical(fresh, p, q...)
				if !slices.Equal(a.ids, b.ids) || !slices.EqualFunc(a.scores, b.scores, func(x, y float64) bool { return x-y < 1e-9 && y-x < 1e-9 }) {
					return false
				}
			}
		}
		return true
	}
	if same() {
		t.Fatal("version-1 postings already score like version 2: the test cannot tell a migration")
	}
	n, err := old.EnsureLexicalIndex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(nodes) {
		t.Errorf("first EnsureLexicalIndex rewrote %d documents, want %d", n, len(nodes))
	}
	if !same() {
		t.Error("after EnsureLexicalIndex the migrated store scores differently from one written by this version")
	}
	for _, p := range []string{"p", "q", ""} {
		a, err := c.HMGet(ctx, redis.StatsKey(old, p), "n", "l", "v").Result()
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.HMGet(ctx, redis.StatsKey(fresh, p), "n", "l").Result()
		if err != nil {
			t.Fatal(err)
		}
		if a[0] != b[0] || a[1] != b[1] || a[2] != "2" {
			t.Errorf("scope %q: migrated stats n, l, v = %v, written by this version n, l = %v", p, a, b)
		}
	}
	if n, err := old.EnsureLexicalIndex(ctx); err != nil || n != 0 {
		t.Errorf("second EnsureLexicalIndex = %d, %v; want 0, nil", n, err)
	}
	// The fresh store's projects were registered current; only its global
	// tag (never registered) is looked at, and its documents are current.
	if n, err := fresh.EnsureLexicalIndex(ctx); err != nil || n != 0 {
		t.Errorf("EnsureLexicalIndex of a store written by this version = %d, %v; want 0, nil", n, err)
	}
}
