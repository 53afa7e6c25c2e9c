package redis_test

import (
	"context"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestLostIDIndexEntryIsWrittenAgain: a new memory's id -> project entry is
// in the id index, on a slot of its own (another primary on a Redis
// Cluster). Lost with its primary while the memory stays (a replica
// promoted without it), the memory could not be read by id any more, and a
// write of the same memory again (a span extracted again after the
// failover) reinforced it without claiming an id. That write now writes the
// entry again. (Found by review.)
func TestLostIDIndexEntryIsWrittenAgain(t *testing.T) {
	c := testCluster(t)
	ns := randomNamespace()
	open := func() *redis.Store {
		s, err := redis.New(c, redis.WithNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	t.Cleanup(func() { _ = redis.DeleteNamespace(context.Background(), c, ns) })
	ctx := t.Context()
	n := memory.Node{ID: "m1", ProjectID: "pa", Subkind: memory.Decision, Scope: memory.ScopeProject,
		Label: "deploy the staging cluster with argo", Confidence: 0.9}
	if _, err := s.Upsert(ctx, n); err != nil {
		t.Fatal(err)
	}
	idKey := redis.IDKey(s, "m1")
	if n, err := c.HDel(ctx, idKey, "m1").Result(); err != nil || n != 1 {
		t.Fatalf("HDEL %s = %d, %v: the id index is not where expected", idKey, n, err)
	}
	if got, err := open().GetMany(ctx, []string{"m1"}); err != nil || len(got) != 0 {
		t.Fatalf("GetMany(m1) = %d nodes, %v with its id's entry lost: the test lost nothing", len(got), err)
	}
	res, err := open().Upsert(ctx, n) // another replica, or this one restarted: no id cache
	if err != nil || res.Created {
		t.Fatalf("Upsert again = %+v, %v: want the memory reinforced", res, err)
	}
	got, err := open().GetMany(ctx, []string{"m1"})
	if err != nil || len(got) != 1 {
		t.Fatalf("GetMany(m1) = %d nodes, %v after the memory was written again: unreachable by id", len(got), err)
	}
}
