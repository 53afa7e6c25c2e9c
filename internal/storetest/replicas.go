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
