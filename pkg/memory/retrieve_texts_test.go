package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// Retrieve's hits carry their bodies from any store; with LeaveText a
// store that keeps text out of memory (memory.TextStore) returns them
// without, FillHitTexts reads them, and the ranking is the same either way.
func TestRetrieveTexts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		now := time.Date(2023, 6, 1, 12, 0, 0, 0, time.UTC)
		st := b.Open(t, storetest.WithClock(func() time.Time { return now }))
		ctx := context.Background()
		var nodes []memory.Node
		for i := range 8 {
			nodes = append(nodes, memory.Node{ID: fmt.Sprintf("n%d", i), Subkind: memory.Observation, Scope: memory.ScopeProject,
				ProjectID: "p", Confidence: 0.9, Label: fmt.Sprintf("the walk number %d", i),
				Body: fmt.Sprintf("the dogs walked for %d minutes by the lake\nsecond line %d", 10*i, i)})
		}
		if err := st.PutBatch(ctx, nodes, nil); err != nil {
			t.Fatal(err)
		}
		bodies := map[string]string{}
		for _, n := range nodes {
			bodies[n.ID] = n.Body
		}
		q := memory.Query{Text: "how long were the dogs walked by the lake", Filter: memory.Filter{ProjectID: "p"}, Now: now}
		full, err := memory.Retrieve(ctx, st, q)
		if err != nil || len(full) == 0 {
			t.Fatalf("Retrieve = %v, %v", full, err)
		}
		for _, h := range full {
			if h.Node.Body != bodies[h.ID] {
				t.Fatalf("hit %s body %q, stored %q", h.ID, h.Node.Body, bodies[h.ID])
			}
		}
		q.LeaveText = true
		bare, err := memory.Retrieve(ctx, st, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(bare) != len(full) {
			t.Fatalf("LeaveText: %d hits, %d without", len(bare), len(full))
		}
		_, keeps := st.(memory.TextStore)
		for i, h := range bare {
			if h.ID != full[i].ID || h.Score != full[i].Score {
				t.Fatalf("LeaveText ranks %s (%v) at %d, without it %s (%v)", h.ID, h.Score, i, full[i].ID, full[i].Score)
			}
			if keeps && h.Node.Body != "" {
				t.Fatalf("LeaveText: hit %s carries its body from a memory.TextStore", h.ID)
			}
		}
		n := len(bare)
		bare, err = memory.FillHitTexts(ctx, st, bare)
		if err != nil || len(bare) != n {
			t.Fatalf("FillHitTexts: %d of %d hits, %v", len(bare), n, err)
		}
		for _, h := range bare {
			if h.Node.Body != bodies[h.ID] {
				t.Fatalf("FillHitTexts: hit %s body %q, stored %q", h.ID, h.Node.Body, bodies[h.ID])
			}
		}
	})
}
