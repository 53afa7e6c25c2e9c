package storetest

import (
	"context"
	"fmt"
	"sync"

	"github.com/engram-memory/engram/pkg/memory"
)

// Replicas is a store's replication as a worker sees it
// (memory.Replicated), scripted: Durable refuses the next n calls
// (Refuse), a failover is counted when a test says so (Failover), and the
// calls are counted. Embedded beside a memory.Store, it makes the store
// Replicated.
type Replicas struct {
	// OnDurable, when set, is called first by each Durable (a test's log
	// of the order of its steps).
	OnDurable func()

	mu        sync.Mutex
	failovers uint64
	refuse    int
	calls     int
}

// Durable implements memory.Replicated: memory.ErrUnavailable while refusals
// are left.
func (r *Replicas) Durable(context.Context) error {
	if r.OnDurable != nil {
		r.OnDurable()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.refuse > 0 {
		r.refuse--
		return fmt.Errorf("%w: no replica acknowledged", memory.ErrUnavailable)
	}
	return nil
}

// Failovers implements memory.Replicated.
func (r *Replicas) Failovers() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failovers
}

// Failover counts a failover (a primary replaced by its replica).
func (r *Replicas) Failover() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failovers++
}

// Refuse makes the next n calls of Durable refuse.
func (r *Replicas) Refuse(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refuse = n
}

// Calls is how many times Durable was called.
func (r *Replicas) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// LosingUpserts is a store whose servers replicate asynchronously
// (Replicas) and lose writes with a failover: after LoseNext(n) the next
// n Upserts that Losable takes (nil: every one) go to Lost, a store
// nobody reads, and each counts a failover (a primary killed after it
// answered, its replica promoted without the write). Lost nil: Upsert
// opens no second store, the tests that lose nothing leave it nil.
type LosingUpserts struct {
	memory.Store
	Replicas
	Lost    memory.Store
	Losable func(memory.Node) bool

	mu   sync.Mutex
	lose int
}

// LoseNext makes the next n Upserts Losable takes lost with a failover.
func (s *LosingUpserts) LoseNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose = n
}

// Upsert implements memory.Store, losing the write as LoseNext says.
func (s *LosingUpserts) Upsert(ctx context.Context, n memory.Node) (memory.UpsertResult, error) {
	s.mu.Lock()
	lose := s.lose > 0 && (s.Losable == nil || s.Losable(n))
	if lose {
		s.lose--
		s.Failover()
	}
	s.mu.Unlock()
	if lose {
		return s.Lost.Upsert(ctx, n)
	}
	return s.Store.Upsert(ctx, n)
}
