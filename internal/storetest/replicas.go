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

// LosingWrites is a store whose servers replicate asynchronously
// (Replicas) and lose writes with a failover (a primary killed after it
// answered, its replica promoted without the write): after LoseNext(n)
// the next n Upserts that Losable takes (nil: every one), after
// LoseNextRevise(n) the next n Revises (the new memory, the old one's
// close and the edge between them: all on the project's primary), go to
// Lost, a store nobody reads, and each counts a failover. Lost nil: the
// tests that lose nothing leave it so.
type LosingWrites struct {
	memory.Store
	Replicas
	Lost    memory.Store
	Losable func(memory.Node) bool

	mu                 sync.Mutex
	lose, loseRevision int
}

// LoseNext makes the next n Upserts Losable takes lost with a failover.
func (s *LosingWrites) LoseNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose = n
}

// LoseNextRevise makes the next n Revises lost with a failover.
func (s *LosingWrites) LoseNextRevise(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loseRevision = n
}

// Upsert implements memory.Store, losing the write as LoseNext says.
func (s *LosingWrites) Upsert(ctx context.Context, n memory.Node) (memory.UpsertResult, error) {
	if s.losing(&s.lose, func() bool { return s.Losable == nil || s.Losable(n) }) {
		return s.Lost.Upsert(ctx, n)
	}
	return s.Store.Upsert(ctx, n)
}

// Revise implements memory.Store, losing the revision as LoseNextRevise
// says (the old memory copied to Lost first, where the revision is made).
func (s *LosingWrites) Revise(ctx context.Context, oldID string, n memory.Node) (memory.Node, error) {
	if !s.losing(&s.loseRevision, func() bool { return true }) {
		return s.Store.Revise(ctx, oldID, n)
	}
	old, err := s.Store.Get(ctx, oldID)
	if err != nil {
		return memory.Node{}, err
	}
	if _, err := s.Lost.Upsert(ctx, old); err != nil {
		return memory.Node{}, err
	}
	return s.Lost.Revise(ctx, oldID, n)
}

// losing takes one of *left when take says so, counting a failover.
func (s *LosingWrites) losing(left *int, take func() bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *left == 0 || !take() {
		return false
	}
	*left--
	s.Failover()
	return true
}
