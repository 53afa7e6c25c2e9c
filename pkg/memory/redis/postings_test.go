package redis_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestPostingsBatchEqualsOneByOne: a PutBatch writes its documents'
// postings in one script grouped by term (scored in Go:
// reindexScoredScript; or in reindexLexScript, as single writes score
// them: both are compared), and leaves
// every lexical key as writing the documents one at a time does: the
// posting lists and their packed scores (each document weighted with the
// statistics the ones before it left), the term dictionary (a term
// emptied by an update leaves it, one added joins), the corpus statistics
// and the cached heads (dropped where a change falls in them, kept where
// none does: the one-by-one writes run the same script, so the heads
// kept are checked by name too).
func TestPostingsBatchEqualsOneByOne(t *testing.T) {
	c := testClient(t)
	ctx := t.Context()
	batch, single, script := openStore(t, c), openStore(t, c), openStore(t, c)
	redis.ScoreInScript(script, true)
	node := func(i int, text string) memory.Node {
		return memory.Node{ID: fmt.Sprintf("n%03d", i), Subkind: memory.Decision, Scope: memory.ScopeProject,
			ProjectID: "p", Label: text, Body: fmt.Sprintf("u%d", i), Confidence: 0.9}
	}
	var first []memory.Node
	for i := range 300 {
		text := "alpha " + strings.Repeat("word ", i%17) + fmt.Sprintf("w%d", i%7)
		if i%5 == 0 {
			text += " beta beta"
		}
		if i == 207 {
			text += " lonely"
		}
		if i < 200 {
			// Lists longer than their heads (see below).
			text += " kappa lambda"
		}
		first = append(first, node(i, text))
	}
	// Updates: terms removed (lonely empties its list), added (gamma is
	// new), rescored (longer documents), and new documents; among them
	// short ones whose alpha postings land in the cached head. Of kappa
	// and lambda only new postings: kappa's above the head's lowest (the
	// head must go), lambda's below it (the head stays).
	var second []memory.Node
	for i := 201; i < 300; i += 3 {
		if i == 207 {
			continue
		}
		second = append(second, node(i, "alpha gamma "+strings.Repeat("other ", i%11)))
	}
	second = append(second, node(207, "gamma only"))
	for i := 300; i < 320; i++ {
		second = append(second, node(i, "alpha alpha gamma kappa"))
	}
	for i := 320; i < 330; i++ {
		second = append(second, node(i, "lambda "+strings.Repeat("long filler text ", 40)))
	}
	write := func(s *redis.Store, nodes []memory.Node, one bool) {
		t.Helper()
		if !one {
			if err := s.PutBatch(ctx, nodes, nil); err != nil {
				t.Fatal(err)
			}
			return
		}
		for _, n := range nodes {
			if err := s.PutBatch(ctx, []memory.Node{n}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	f := memory.Filter{ProjectID: "p"}
	for _, s := range []*redis.Store{batch, single, script} {
		write(s, first, s == single)
		// Cached heads of alpha (its head holds a part of the list) and
		// of the w<n> terms (whole lists).
		redis.SetLexicalBudget(s, 60, 20)
		for _, q := range [][]string{{"alpha"}, {"w1", "w2", "w3"}, {"beta"}, {"kappa"}, {"lambda"}} {
			if _, err := s.Lexical(ctx, q, f, 10); err != nil {
				t.Fatal(err)
			}
		}
		write(s, second, s == single)
	}
	want := lexicalKeys(t, c, single)
	if len(want) < 10 {
		t.Fatalf("only %d lexical keys written one by one", len(want))
	}
	for _, other := range []struct {
		name string
		s    *redis.Store
	}{{"batch", batch}, {"scored in the script", script}} {
		got := lexicalKeys(t, c, other.s)
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if got[k] != want[k] {
				t.Errorf("%s:\n %s %s\n one by one %s", k, other.name, got[k], want[k])
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s only in the store written %s", k, other.name)
			}
		}
	}
	if !strings.Contains(want["{p:p}:terms"], "gamma") || strings.Contains(want["{p:p}:terms"], "lonely") {
		t.Fatalf("dictionary %s: want gamma in it and lonely out", want["{p:p}:terms"])
	}
	// Of the heads read (alpha, beta, w1-w3, kappa, lambda) only lambda's
	// saw no change in it; w1-w3 and beta lost postings only.
	var heads []string
	for k, v := range want {
		if v == "cached" {
			heads = append(heads, k)
		}
	}
	if !slices.Equal(heads, []string{"{p:p}:th:lambda"}) {
		t.Fatalf("cached heads %v after the updates, want lambda's only", heads)
	}
}

// lexicalKeys is every posting list, the term dictionary, the corpus
// statistics and the set of cached heads of s, by key without the
// namespace, each as text.
func lexicalKeys(t *testing.T, c *goredis.Client, s *redis.Store) map[string]string {
	t.Helper()
	ctx := t.Context()
	ns := redis.Namespace(s) + ":"
	keys, err := c.Keys(ctx, ns+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		name := strings.TrimPrefix(k, ns)
		_, rest, _ := strings.Cut(name, "}:")
		switch {
		case strings.HasPrefix(rest, "t:") || rest == "terms":
			zs, err := c.ZRangeWithScores(ctx, k, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			out[name] = fmt.Sprint(zs)
		case rest == "bm":
			h, err := c.HGetAll(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			out[name] = fmt.Sprint(h)
		case strings.HasPrefix(rest, "th:"):
			out[name] = "cached"
		}
	}
	return out
}
