package mcptool

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// unreplicated is a store whose writes are never confirmed on a replica
// (the Redis store while its replicas lag).
type unreplicated struct {
	memory.Store
	calls int
}

func (u *unreplicated) Durable(context.Context) error {
	u.calls++
	return fmt.Errorf("primary 10.0.0.1:6379: %w: none of its 1 replicas acknowledged its writes within 2s", memory.ErrUnavailable)
}

// A change the store cannot confirm on a replica is made, and its result
// says it is not confirmed yet; a read says nothing of the kind and asks
// nothing of the store's replicas.
func TestWritesNotConfirmedOnAReplicaSaySo(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite)
	u := &unreplicated{Store: f.store}
	tool, err := New(u, f.emb, Config{MinConfidence: 0.3, CrossProject: true})
	if err != nil {
		t.Fatal(err)
	}
	f.tool = tool
	r := f.one(shop, Op{Op: OpRecall, Query: "stripe webhook"})
	if u.calls != 0 || strings.Contains(r.Note, "durable") {
		t.Fatalf("a recall asked the replicas (%d calls) or says %q", u.calls, r.Note)
	}
	r = f.one(shop, Op{Op: OpForget, ID: f.ids["webhook"], Reason: "fixed for good in v2"})
	if u.calls != 1 || !strings.Contains(r.Note, "not yet confirmed durable") {
		t.Fatalf("forget: %d Durable calls, note %q", u.calls, r.Note)
	}
	if n, err := f.store.Get(f.ctx, f.ids["webhook"]); err != nil || n.ArchivedAt.IsZero() {
		t.Fatalf("the forget was not made: %v %+v", err, n.ArchivedAt)
	}
}

// failingOver is a store whose replicas acknowledge but whose servers
// failed over while the ops ran (a primary replaced by a replica that may
// lack the writes).
type failingOver struct {
	memory.Store
	storetest.Replicas
}

func (s *failingOver) Archive(ctx context.Context, id string) error {
	s.Failover() // the write answered, then its primary was lost
	return s.Store.Archive(ctx, id)
}

// A change made while the store failed over is not confirmed, though
// Durable succeeds afterwards (on the primaries serving then).
func TestWritesDuringAFailoverSaySo(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite)
	st := &failingOver{Store: f.store}
	tool, err := New(st, f.emb, Config{MinConfidence: 0.3, CrossProject: true})
	if err != nil {
		t.Fatal(err)
	}
	f.tool = tool
	r := f.one(shop, Op{Op: OpForget, ID: f.ids["webhook"], Reason: "fixed for good in v2"})
	if st.Calls() != 1 || !strings.Contains(r.Note, "not yet confirmed durable") {
		t.Fatalf("forget during a failover: %d Durable calls, note %q", st.Calls(), r.Note)
	}
	r = f.one(shop, Op{Op: OpRestore, ID: f.ids["webhook"]})
	if st.Calls() != 2 || strings.Contains(r.Note, "durable") {
		t.Fatalf("restore without a failover: %d Durable calls, note %q", st.Calls(), r.Note)
	}
}
