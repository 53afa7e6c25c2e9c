package redis_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestBudgetedLexical: when a common term's posting list is read only in
// part, the leading candidates still get their exact BM25 scores (the
// contributions of the unread postings are looked up), and when none of
// the leading candidates passes the filter the rest are judged too. The
// exact answer is the same store read with a budget that reads every list
// whole.
func TestBudgetedLexical(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	node := func(id, label, body string, sk memory.Subkind) memory.Node {
		// The id in the body keeps contents distinct (one more term each).
		return memory.Node{ID: id, Subkind: sk, Scope: memory.ScopeProject, ProjectID: "p",
			Label: label, Body: body + " u" + id, Confidence: 0.9}
	}
	long := strings.Repeat("filler words that make the document long ", 6)
	var nodes []memory.Node
	// Short documents that say "alpha" three times: the best postings of
	// alpha, which the budget reads. The five highest ids are observations.
	for i := range 150 {
		sk := memory.Decision
		if i >= 145 {
			sk = memory.Observation
		}
		nodes = append(nodes, node(fmt.Sprintf("a%03d", i), "alpha alpha alpha", "", sk))
	}
	// Long documents with "beta" (rare, so they lead) and one "alpha", whose
	// alpha postings have the least impact: none of them is read.
	for i := range 12 {
		nodes = append(nodes, node(fmt.Sprintf("b%03d", i), strings.Repeat("beta ", 1+i%3)+"alpha", long, memory.Decision))
	}
	// Documents without either term, so that alpha is not in every document.
	for i := range 150 {
		nodes = append(nodes, node(fmt.Sprintf("g%03d", i), "gamma", "", memory.Decision))
	}
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	terms := []string{"alpha", "beta"}
	for _, tc := range []struct {
		name   string
		filter memory.Filter
		prefix string // every result's id starts so
	}{
		{"leaders completed", memory.Filter{ProjectID: "p"}, "b"},
		{"leaders filtered out", memory.Filter{ProjectID: "p", Subkinds: []memory.Subkind{memory.Observation}}, "a14"},
	} {
		redis.SetLexicalBudget(s, 1_000_000, 1_000_000)
		exact, err := s.Lexical(ctx, terms, tc.filter, 5)
		if err != nil {
			t.Fatal(err)
		}
		// beta (12 postings) is read whole, alpha (162) only its best 28.
		redis.SetLexicalBudget(s, 40, 10)
		got, err := s.Lexical(ctx, terms, tc.filter, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(exact) != 5 || !slices.Equal(got, exact) {
			t.Fatalf("%s: budgeted read\n %v\nexact\n %v", tc.name, got, exact)
		}
		for _, sc := range got {
			if !strings.HasPrefix(sc.ID, tc.prefix) {
				t.Fatalf("%s: result %v, want ids starting %q", tc.name, got, tc.prefix)
			}
		}
	}
	// Without the looked-up contributions a beta document scores only its
	// beta term: the exact scores must be higher than that.
	redis.SetLexicalBudget(s, 1_000_000, 1_000_000)
	betaOnly, err := s.Lexical(ctx, []string{"beta"}, memory.Filter{ProjectID: "p"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	both, _ := s.Lexical(ctx, terms, memory.Filter{ProjectID: "p"}, 5)
	for i := range betaOnly {
		if both[i].ID == betaOnly[i].ID && both[i].Score <= betaOnly[i].Score {
			t.Fatalf("%s scores %v with alpha and beta, %v with beta alone: alpha adds nothing, the test proves nothing",
				both[i].ID, both[i].Score, betaOnly[i].Score)
		}
	}
}
