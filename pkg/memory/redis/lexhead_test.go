package redis_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestLexicalHeadsExact: the lexical channel answers from the cached heads
// of posting lists exactly what it answers from the sorted sets, after
// every kind of change to a list with a cached head: postings added above
// the head's lowest (they must appear), below it (the head is kept),
// removed by an update (the document must go) and by a session's erasure.
func TestLexicalHeadsExact(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	// A budget that reads alpha (400 postings) only in part, so that its
	// head (256, the smallest that holds the 150 read) is not the whole list.
	redis.SetLexicalBudget(s, 150, 150)
	node := func(id, label, body, session string) memory.Node {
		return memory.Node{ID: id, Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "p",
			SessionID: session, Label: label, Body: body + " u" + id, Confidence: 0.9}
	}
	var nodes []memory.Node
	for i := range 400 {
		// Lengths vary, so impacts do.
		label := "alpha " + strings.Repeat("word ", i%40)
		if i%4 == 0 {
			label += "delta" // 100 documents
		}
		nodes = append(nodes, node(fmt.Sprintf("a%03d", i), label, "", ""))
	}
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	f := memory.Filter{ProjectID: "p"}
	terms := []string{"alpha"}
	check := func(step string) []memory.Scored {
		t.Helper()
		redis.ReadHeads(s, true)
		got, err := s.Lexical(ctx, terms, f, 20)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := c.Exists(ctx, redis.HeadKey(s, "p", "alpha")).Result(); err != nil || n != 1 {
			t.Fatalf("%s: no cached head of alpha after a read (%v)", step, err)
		}
		redis.ReadHeads(s, false)
		want, err := s.Lexical(ctx, terms, f, 20)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != 20 || !slices.Equal(got, want) {
			t.Fatalf("%s: from the heads\n %v\nfrom the sorted sets\n %v", step, got, want)
		}
		return got
	}
	has := func(l []memory.Scored, prefix string) bool {
		return slices.ContainsFunc(l, func(sc memory.Scored) bool { return strings.HasPrefix(sc.ID, prefix) })
	}
	check("built")

	// Two lists read in part (one of them, delta, whole in its head), the
	// leaders completed by ZMSCORE: the same answer as the sorted sets give.
	redis.SetLexicalBudget(s, 40, 10)
	terms = []string{"delta", "alpha"}
	check("completed from the heads")
	redis.SetLexicalBudget(s, 150, 150)
	terms = []string{"alpha"}

	// Short documents that say alpha three times: the best postings.
	var top []memory.Node
	for i := range 5 {
		top = append(top, node(fmt.Sprintf("t%03d", i), "alpha alpha alpha", "", "s1"))
	}
	if err := s.PutBatch(ctx, top, nil); err != nil {
		t.Fatal(err)
	}
	if !has(check("added above"), "t") {
		t.Fatal("the new best alpha documents are not found")
	}

	// A long document with one alpha: below the head, which stays.
	if err := s.PutBatch(ctx, []memory.Node{node("z000", "alpha "+strings.Repeat("long words ", 60), "", "")}, nil); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Exists(ctx, redis.HeadKey(s, "p", "alpha")).Result(); n != 1 {
		t.Fatal("a posting below the head dropped it")
	}
	check("added below")

	// An update that takes alpha out of the best documents.
	top[0].Label, top[1].Label = "omega", "omega"
	if err := s.PutBatch(ctx, top[:2], nil); err != nil {
		t.Fatal(err)
	}
	if got := check("removed by an update"); slices.ContainsFunc(got, func(sc memory.Scored) bool { return sc.ID == "t000" || sc.ID == "t001" }) {
		t.Fatalf("updated documents without alpha still found: %v", got)
	}

	// The session's erasure removes the rest of them.
	if _, err := s.Erase(ctx, memory.EraseScope{Project: "p", Session: "s1"}, nil); err != nil {
		t.Fatal(err)
	}
	if has(check("erased"), "t") {
		t.Fatal("erased documents still found")
	}
}
