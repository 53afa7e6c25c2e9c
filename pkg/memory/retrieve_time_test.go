package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// The time channel: a question that names a span of the past ("last
// Saturday") lifts the lexical matches written within it above better
// lexical matches written at other times; without the span, or with the
// channel off, the lexical order stands.
func TestRetrieveTimeChannel(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		// A Thursday; last Saturday is 5 days back.
		asked := time.Date(2023, 3, 9, 15, 0, 0, 0, time.UTC)
		clock := asked
		st := b.Open(t, storetest.WithClock(func() time.Time { return clock }))
		ctx := context.Background()
		add := func(at time.Time, label string) memory.Node {
			t.Helper()
			clock = at
			r, err := st.Upsert(ctx, memory.Node{Subkind: memory.Observation, Scope: memory.ScopeProject, ProjectID: "p",
				Confidence: 0.9, Label: label})
			if err != nil {
				t.Fatal(err)
			}
			return r.Node
		}
		// The better lexical match (shorter, both words) is from a month ago.
		old := add(asked.Add(-30*24*time.Hour), "birthday gift from my aunt")
		saturday := add(asked.Add(-5*24*time.Hour).Add(-3*time.Hour), "a crystal chandelier, a gift, arrived today from my aunt with a card and a long story")
		add(asked.Add(-2*24*time.Hour), "the garden needs water")
		clock = asked
		first := func(text string, rk memory.Ranking) string {
			t.Helper()
			hits, err := memory.Retrieve(ctx, st, memory.Query{Text: text, Filter: memory.Filter{ProjectID: "p"}, Now: asked, Ranking: &rk})
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) < 2 {
				t.Fatalf("%q: %d hits, want both gifts", text, len(hits))
			}
			return hits[0].ID
		}
		on := memory.Ranking{Fusion: memory.FuseScores, Lexical: 1, Time: 0.5}
		off := on
		off.Time = 0
		if got := first("what gift did my aunt give me last Saturday", on); got != saturday.ID {
			t.Errorf("last Saturday, time channel on: first hit %s, want Saturday's %s", got, saturday.ID)
		}
		if got := first("what gift did my aunt give me last Saturday", off); got != old.ID {
			t.Errorf("time channel off: first hit %s, want the better lexical match %s", got, old.ID)
		}
		if got := first("what gift did my aunt give me", on); got != old.ID {
			t.Errorf("no span named: first hit %s, want the better lexical match %s", got, old.ID)
		}
	})
}
