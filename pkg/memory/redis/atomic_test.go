package redis_test

import (
	"sync"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestConcurrentWritesAreAtomic races many writers on one node and one
// edge: the optimistic transactions must lose no increment and create the
// node once.
func TestConcurrentWritesAreAtomic(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) *redis.Store
	}{
		{"standalone", func(t *testing.T) *redis.Store { return openStore(t, testClient(t)) }},
		{"cluster", func(t *testing.T) *redis.Store { return openStore(t, testCluster(t)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.open(t)
			ctx := t.Context()
			const writers = 12
			var wg sync.WaitGroup
			created := make(chan string, writers)
			errs := make(chan error, 3*writers)
			for range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := s.Upsert(ctx, memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "one memory"})
					if err != nil {
						errs <- err
						return
					}
					if r.Created {
						created <- r.Node.ID
					}
				}()
			}
			wg.Wait()
			close(created)
			var ids []string
			for id := range created {
				ids = append(ids, id)
			}
			if len(ids) != 1 {
				t.Fatalf("%d upserts of one digest created %d nodes", writers, len(ids))
			}
			other, err := s.Upsert(ctx, memory.Node{Subkind: memory.Decision, Label: "a global one"})
			if err != nil {
				t.Fatal(err)
			}
			for range writers {
				wg.Add(2)
				go func() {
					defer wg.Done()
					if err := s.ApplyFeedback(ctx, map[string]memory.Verdict{ids[0]: memory.VerdictUsed}); err != nil {
						errs <- err
					}
				}()
				go func() {
					defer wg.Done()
					// across slots: the project node links to a global one
					if _, err := s.Link(ctx, memory.Edge{Src: ids[0], Dst: other.Node.ID, Relation: memory.About}); err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			n, err := s.Get(ctx, ids[0])
			if err != nil {
				t.Fatal(err)
			}
			wantWeight := min(memory.MaxWeight, 1+float64(writers-1)*memory.WeightStep+float64(writers)*memory.UsedWeightStep)
			if n.Useful != writers || n.Weight != wantWeight {
				t.Fatalf("after %d reinforcements and %d used verdicts: useful %d weight %v, want %d and %v",
					writers-1, writers, n.Useful, n.Weight, writers, wantWeight)
			}
			edges, err := s.Edges(ctx, other.Node.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(edges) != 1 || edges[0].Weight != min(memory.MaxWeight, 1+float64(writers-1)*memory.WeightStep) {
				t.Fatalf("edges seen from the global end after %d links: %+v", writers, edges)
			}
		})
	}
}
