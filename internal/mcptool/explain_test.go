package mcptool

import (
	"math"
	"reflect"
	"testing"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestRecallExplain: recall with explain answers the same memories with
// the same scores, each with why it ranks there (its channels, the
// prior); without explain there is no why. (Each recall counts an access,
// which moves the recency prior by the time between the two calls: the
// scores are compared to a millionth, and memories by id. That the
// explanation changes no ranking is held exactly by the injector's
// TestExplainChangesNothing.)
func TestRecallExplain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b.Open)
		const q = "why did the Stripe webhook signature fail?"
		plain := f.one(shop, Op{Op: OpRecall, Query: q})
		explained := f.one(shop, Op{Op: OpRecall, Query: q, Explain: true})
		if len(plain.Memories) == 0 || len(plain.Memories) != len(explained.Memories) {
			t.Fatalf("recall %v, with explain %v", memIDs(plain.Memories), memIDs(explained.Memories))
		}
		byID := map[string]Memory{}
		for _, m := range plain.Memories {
			if m.Why != nil {
				t.Errorf("a why nobody asked for: %+v", m.Why)
			}
			byID[m.ID] = m
		}
		for i, m := range explained.Memories {
			w := m.Why
			if w == nil || w.Rank != i+1 || w.Score != m.Score || len(w.Channels) == 0 || w.Prior.Value <= 0 {
				t.Fatalf("memory %d %s: why %+v", i, m.ID, w)
			}
			p, ok := byID[m.ID]
			if !ok || math.Abs(p.Score-m.Score) > 1e-6*p.Score {
				t.Fatalf("memory %s: score %v with explain, %v without (found %v)", m.ID, m.Score, p.Score, ok)
			}
			m.Why, m.Score = nil, p.Score
			if !reflect.DeepEqual(m, p) {
				t.Errorf("memory %d differs with explain:\n%+v\n%+v", i, m, p)
			}
		}
		first := explained.Memories[0].Why
		if c := first.Channels[0]; c.Channel != memory.ChannelLexical || c.Rank < 1 || c.Score <= 0 || c.Share <= 0 {
			t.Errorf("the webhook failure's first channel: %+v", first.Channels)
		}
	})
}
