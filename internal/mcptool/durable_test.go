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
