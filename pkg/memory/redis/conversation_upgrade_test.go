package redis_test

import (
	"fmt"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// Memories written before the conversation sets existed get their
// neighbours from EnsureConversationIndex, once: afterwards Adjacent
// answers as over a store that kept the sets from the start, and a second
// run indexes nothing.
func TestEnsureConversationIndexFillsOlderScopes(t *testing.T) {
	c := testClient(t)
	st := openStore(t, c)
	ctx := t.Context()
	var nodes []memory.Node
	for i := range 12 {
		project := []string{"p", "q"}[i%2]
		n, err := st.Upsert(ctx, memory.Node{Subkind: memory.Observation, Scope: memory.ScopeSession, ProjectID: project,
			SessionID: fmt.Sprintf("s%d", i%3), Confidence: 0.9, Label: fmt.Sprintf("turn %d", i), Body: fmt.Sprintf("what was said in turn %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n.Node)
	}
	want, err := st.Adjacent(ctx, nodes, 3)
	if err != nil {
		t.Fatal(err)
	}
	if countNeighbours(want) == 0 {
		t.Fatal("no neighbours before the sets were dropped: the test shows nothing")
	}
	// As written before the sets existed: no sets, no version.
	for _, p := range []string{"p", "q"} {
		for s := range 3 {
			if err := c.Del(ctx, redis.ConversationKey(st, p, fmt.Sprintf("s%d", s))).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.HDel(ctx, redis.StatsKey(st, p), "cv").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := st.Adjacent(ctx, nodes, 3); err != nil || countNeighbours(got) != 0 {
		t.Fatalf("neighbours without the sets: %v, %v", got, err)
	}
	n, err := st.EnsureConversationIndex(ctx)
	if err != nil || n != len(nodes) {
		t.Fatalf("indexed %d of %d: %v", n, len(nodes), err)
	}
	got, err := st.Adjacent(ctx, nodes, 3)
	if err != nil {
		t.Fatal(err)
	}
	for id, a := range want {
		if fmt.Sprint(got[id]) != fmt.Sprint(a) {
			t.Errorf("%s: neighbours %v after the upgrade, want %v", id, got[id], a)
		}
	}
	if n, err := st.EnsureConversationIndex(ctx); err != nil || n != 0 {
		t.Fatalf("a second run indexed %d: %v", n, err)
	}
}

func countNeighbours(m map[string]memory.Adjacency) int {
	n := 0
	for _, a := range m {
		n += len(a.Before) + len(a.After)
	}
	return n
}
