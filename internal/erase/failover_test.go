package erase

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// failingOverStore is a store whose servers failed over during an erasure:
// its replicas acknowledge afterwards, but a replica promoted meanwhile may
// hold records the erasure deleted on the primary it replaced.
type failingOverStore struct {
	Store
	storetest.Replicas
}

func (s *failingOverStore) Erase(ctx context.Context, scope memory.EraseScope, seen memory.Seen) (memory.Erased, error) {
	s.Failover() // the deletions answered, then a primary was lost
	return s.Store.Erase(ctx, scope, seen)
}

// An erasure during which the store failed over is not reported durable,
// though Durable succeeds afterwards: the receipt says to erase again.
func TestErasureDuringAFailoverIsNotDurable(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenSQLite(t)
	if _, err := st.Upsert(ctx, memory.Node{Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "acme",
		Label: "Payments go through Stripe Checkout", Confidence: 0.9}); err != nil {
		t.Fatal(err)
	}
	fo := &failingOverStore{Store: st.(Store)}
	r, err := New(fo).Erase(ctx, Scope{Project: "acme"}, Options{})
	if !errors.Is(err, memory.ErrFailedOver) || fo.Calls() != 1 {
		t.Fatalf("Erase = %v after %d Durable calls: want ErrFailedOver", err, fo.Calls())
	}
	if r.Complete() || len(r.Persistence.Incomplete) == 0 || !strings.Contains(r.Persistence.Incomplete[len(r.Persistence.Incomplete)-1], "erase again") {
		t.Fatalf("receipt %+v: want the deletions not confirmed", r.Persistence)
	}

	calm := &onlyReplicas{Store: st.(Store), Replicas: &storetest.Replicas{}}
	calm.Failover() // before the erasure began: nothing of it could be lost
	if _, err := New(calm).Erase(ctx, Scope{Project: "acme"}, Options{}); err != nil || calm.Calls() != 1 {
		t.Fatalf("Erase without a failover during it: %v after %d Durable calls", err, calm.Calls())
	}
}

// onlyReplicas is a store with replicas that no failover touches during
// the erasure.
type onlyReplicas struct {
	Store
	*storetest.Replicas
}
