package memory_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// lexicalOnly hides a store's optional capabilities (memory.Conversations
// among them): Retrieve then ranks as a store without them would.
type lexicalOnly struct{ memory.RetrievalStore }

// The conversation around a turn is evidence about it: the answer to a
// question a turn asks is the turn after it, which shares no word with a
// question that matches the asking turn. It ranks at ConversationAnswer of
// the asking turn's score, the turn before a hit at ConversationContext of
// it, never above the hit they come from; an archived neighbour is passed
// over for the next one; without the capability neither is found.
func TestRetrieveConversationNeighbours(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		now := time.Date(2023, 6, 1, 12, 0, 0, 0, time.UTC)
		st := b.Open(t, storetest.WithClock(func() time.Time { return now }))
		ctx := context.Background()
		at := now.Add(-48 * time.Hour) // one session, every turn written at once
		turn := func(i int, label string) memory.Node {
			return memory.Node{ID: fmt.Sprintf("c-D1-%d", i), Subkind: memory.Observation, Scope: memory.ScopeProject,
				ProjectID: "p", Confidence: 0.9, Label: label, CreatedAt: at, UpdatedAt: at}
		}
		nodes := []memory.Node{
			turn(8, "Andrew: We went to the lake on Sunday, it was lovely."),
			turn(9, "Audrey: My pups sleep on the sofa all afternoon now."),
			turn(10, "Audrey: How long do you usually walk your dogs for?"),
			turn(11, "Andrew: Varies depending on the day, but usually for about an hour."),
			turn(12, "Audrey: That sounds like a good routine, they must love it."),
		}
		for i := range 12 { // another session, days later: none of these is a neighbour
			n := turn(100+i, fmt.Sprintf("Andrew: filler line number %d about cooking pasta", i))
			n.CreatedAt, n.UpdatedAt = at.Add(24*time.Hour), at.Add(24*time.Hour)
			nodes = append(nodes, n)
		}
		if err := st.PutBatch(ctx, nodes, nil); err != nil {
			t.Fatal(err)
		}
		rk := memory.Ranking{Fusion: memory.FuseScores, Lexical: 1, Prior: 0}
		q := memory.Query{Text: "how long does Audrey walk the dogs", Filter: memory.Filter{ProjectID: "p"}, Now: now, Ranking: &rk}
		byID := func(hits []memory.Hit) map[string]memory.Hit {
			m := map[string]memory.Hit{}
			for _, h := range hits {
				m[h.ID] = h
			}
			return m
		}
		hits, err := memory.Retrieve(ctx, st, q)
		if err != nil {
			t.Fatal(err)
		}
		got := byID(hits)
		ask, ok := got["c-D1-10"]
		if !ok || hits[0].ID != ask.ID {
			t.Fatalf("the asking turn must rank first: %v", hits)
		}
		answer, ok := got["c-D1-11"]
		if !ok || !answer.Conversation || hits[1].ID != answer.ID {
			t.Fatalf("the answer (no content word of the question) must come second, through the conversation: %v", hits)
		}
		if want := memory.ConversationAnswer * ask.Fused; math.Abs(answer.Score-want) > 1e-9 {
			t.Errorf("the answer scores %v, want %v x the asking turn's %v", answer.Score, memory.ConversationAnswer, ask.Fused)
		}
		before, ok := got["c-D1-9"]
		if !ok || before.Score < memory.ConversationContext*ask.Fused-1e-9 {
			t.Errorf("the turn before the hit must score at least %v x its %v: %+v", memory.ConversationContext, ask.Fused, before)
		}
		for _, h := range hits {
			if h.Score > ask.Score+1e-9 {
				t.Errorf("%s scores %v, above the best direct hit %v", h.ID, h.Score, ask.Score)
			}
		}
		if _, ok := got["c-D1-100"]; ok {
			t.Errorf("a turn of another session came in: %v", hits)
		}
		// Without the capability, the answer has only its own score (a
		// stop word's, "the day") and ranks last of the session.
		plain, err := memory.Retrieve(ctx, lexicalOnly{st}, q)
		if err != nil {
			t.Fatal(err)
		}
		if a, ok := byID(plain)["c-D1-11"]; ok && (a.Conversation || a.Score != a.Fused || plain[len(plain)-1].ID != a.ID) {
			t.Errorf("without memory.Conversations the answer must rank on its own score: %v", plain)
		}
		// An archived answer is passed over for the turn after it.
		if err := st.Archive(ctx, "c-D1-11"); err != nil {
			t.Fatal(err)
		}
		hits, err = memory.Retrieve(ctx, st, q)
		if err != nil {
			t.Fatal(err)
		}
		got = byID(hits)
		if _, ok := got["c-D1-11"]; ok {
			t.Errorf("an archived turn was recalled: %v", hits)
		}
		if next, ok := got["c-D1-12"]; !ok || !next.Conversation {
			t.Errorf("the turn after the archived answer must take its place: %v", hits)
		}
	})
}
