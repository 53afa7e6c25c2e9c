package redis_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestAdjacentPlainReadsMatchScript: Adjacent's plain reads answer what
// adjacentScript answers, for every memory of a conversation with runs of
// memories written in the same millisecond, gaps longer than
// memory.ConversationGap, a memory the store does not hold and one passed
// with another time than stored; and when a write between its two reads
// moves the memories' ranks (the script answers those).
func TestAdjacentPlainReadsMatchScript(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var nodes []memory.Node
	add := func(at time.Time, n int) {
		for range n {
			nodes = append(nodes, memory.Node{ID: fmt.Sprintf("m%d", len(nodes)), Subkind: memory.Decision,
				Scope: memory.ScopeProject, ProjectID: "p", SessionID: "s", Label: "x", Body: fmt.Sprint("y", len(nodes)),
				Confidence: 0.9, CreatedAt: at})
		}
	}
	add(base, 1)
	add(base.Add(time.Minute), 3)
	add(base.Add(2*time.Minute), 13)
	add(base.Add(3*time.Minute), 2)
	add(base.Add(3*time.Hour), 1) // past the gap
	add(base.Add(3*time.Hour+time.Second), 4)
	add(base.Add(9*time.Hour), 1) // alone
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	stored, err := s.GetMany(ctx, ids(nodes))
	if err != nil {
		t.Fatal(err)
	}
	missing := stored[0]
	missing.ID = "gone"
	moved := stored[1]
	moved.CreatedAt = moved.CreatedAt.Add(30 * time.Second)
	ask := append(slices.Clone(stored), missing, moved)
	for _, k := range []int{1, 2, 3} {
		got, err := s.Adjacent(ctx, ask, k)
		if err != nil {
			t.Fatal(err)
		}
		want, err := redis.AdjacentScripted(ctx, s, ask, k)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(got, want, func(a, b memory.Adjacency) bool {
			return slices.Equal(a.Before, b.Before) && slices.Equal(a.After, b.After)
		}) {
			t.Fatalf("k=%d: plain reads\n %v\nscript\n %v", k, got, want)
		}
		if _, ok := got["gone"]; ok || len(got) != len(stored) {
			t.Fatalf("k=%d: %d entries (want one per stored memory, %d)", k, len(got), len(stored))
		}
		if a := got["m0"]; len(a.After) != min(k, 3) {
			t.Fatalf("k=%d: m0's neighbours after it: %v", k, a.After)
		}
	}

	// A memory written between the reads, first in the conversation: every
	// rank read is one short, and the script answers them all.
	early := memory.Node{ID: "early", Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "p",
		SessionID: "s", Label: "x", Body: "early", Confidence: 0.9, CreatedAt: base.Add(-time.Minute)}
	redis.BetweenAdjacentReads(s, func() {
		if err := s.PutBatch(ctx, []memory.Node{early}, nil); err != nil {
			t.Error(err)
		}
	})
	got, err := s.Adjacent(ctx, stored, 2)
	redis.BetweenAdjacentReads(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := redis.AdjacentScripted(ctx, s, stored, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(got, want, func(a, b memory.Adjacency) bool {
		return slices.Equal(a.Before, b.Before) && slices.Equal(a.After, b.After)
	}) {
		t.Fatalf("a write between the reads: plain reads\n %v\nscript\n %v", got, want)
	}
	if b := got["m0"].Before; !slices.Equal(b, []string{"early"}) {
		t.Fatalf("m0's neighbour before it after the write between the reads: %v, want [early]", b)
	}
}

func ids(nodes []memory.Node) []string {
	out := make([]string, len(nodes))
	for i := range nodes {
		out[i] = nodes[i].ID
	}
	return out
}
