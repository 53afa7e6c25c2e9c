package redis_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// formatNodes writes three nodes in project p and one in q and returns
// their ids in that order.
func formatNodes(t *testing.T, s *redis.Store) []string {
	t.Helper()
	var ids []string
	for i, lbl := range []string{"Deploys run through make release", "The staging database is Postgres 16", "Tabs, not spaces, in Go files", "Billing retries twice"} {
		p := "p"
		if i == 3 {
			p = "q"
		}
		res, err := s.Upsert(t.Context(), memory.Node{Subkind: memory.Decision, ProjectID: p, Label: lbl, Confidence: 0.8})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Node.ID)
	}
	return ids
}

// oldReplicaEdit changes a node's label as a replica of the version before
// the format key does: its hash only, not its copy.
func oldReplicaEdit(t *testing.T, c goredis.UniversalClient, s *redis.Store, project, id, label string) memory.Node {
	t.Helper()
	n, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	n.Label = label
	n.Embedding = nil
	if err := c.HSet(t.Context(), redis.NodeKey(s, project, id), redis.FieldPacked, redis.PackNode(&n)).Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

func labels(t *testing.T, s *redis.Store, ids []string) []string {
	t.Helper()
	nodes, err := s.GetMany(t.Context(), ids)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range nodes {
		out = append(out, n.Label)
	}
	return out
}

// The copies are read only at FormatNodeCopies: a store at the base
// format reads each node's own hash, so an edit by a replica of an earlier
// version (which leaves the copy stale) is seen; at the latest format the
// copy is what a load returns.
func TestNodeCopiesReadOnlyAtTheirFormat(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	ids := formatNodes(t, s)
	want := []string{"Deploys run through make release", "The staging database is Postgres 16", "Tabs, not spaces, in Go files", "Billing retries twice"}
	if got := labels(t, s, ids); !slices.Equal(got, want) {
		t.Fatalf("GetMany = %q, want %q", got, want)
	}
	if missing, err := redis.MissingNodeCopies(ctx, s); err != nil || len(missing) > 0 {
		t.Fatalf("nodes written at the latest format without a copy: %v (%v)", missing, err)
	}

	// At the latest format a load reads the copy: a copy changed behind
	// the store's back is what GetMany returns (what a stale copy would
	// do, and why the format waits for the operator).
	planted := memory.Node{ID: ids[1], Subkind: memory.Decision, ProjectID: "p", Label: "planted"}
	if err := c.HSet(ctx, redis.PackedNodesKey(s, "p"), ids[1], redis.PackNode(&planted)).Err(); err != nil {
		t.Fatal(err)
	}
	if got := labels(t, s, ids); got[1] != "planted" {
		t.Fatalf("at format %d GetMany = %q: the copy was not read", redis.FormatNodeCopies, got)
	}

	// A rollback: reads go back to the nodes' own hashes.
	if err := s.SetFormat(ctx, redis.FormatBase); err != nil {
		t.Fatal(err)
	}
	if got := labels(t, s, ids); !slices.Equal(got, want) {
		t.Fatalf("after the rollback GetMany = %q, want %q", got, want)
	}
	oldReplicaEdit(t, c, s, "p", ids[0], "Deploys run through the pipeline")
	if got := labels(t, s, ids); got[0] != "Deploys run through the pipeline" {
		t.Fatalf("at the base format an earlier version's edit is not read: %q", got)
	}
	if err := s.SetFormat(ctx, redis.FormatNodeCopies); err == nil {
		t.Fatal("SetFormat raised the format without the rebuild")
	}
	if err := c.Del(ctx, redis.PackedNodesKey(s, "p")).Err(); err != nil {
		t.Fatal(err)
	}
}

// FinishUpgrade rebuilds the copies from the nodes (missing, stale and
// orphaned ones) before it raises the format; reads then answer as the
// nodes' own hashes do.
func TestFinishUpgradeRebuildsTheCopies(t *testing.T) {
	t.Run("standalone", func(t *testing.T) { finishUpgrade(t, testClient(t)) })
	t.Run("cluster", func(t *testing.T) { finishUpgrade(t, testCluster(t)) })
}

func finishUpgrade(t *testing.T, c goredis.UniversalClient) {
	s := openStore(t, c)
	ctx := t.Context()
	ids := formatNodes(t, s)
	if err := s.SetFormat(ctx, redis.FormatBase); err != nil {
		t.Fatal(err)
	}
	// What replicas of an earlier version leave: a node with no copy (one
	// written by them), a stale copy (one edited by them), the copy of a
	// node they erased.
	if err := c.HDel(ctx, redis.PackedNodesKey(s, "q"), ids[3]).Err(); err != nil {
		t.Fatal(err)
	}
	oldReplicaEdit(t, c, s, "p", ids[0], "Deploys run through the pipeline")
	gone := memory.Node{ID: "gone", Subkind: memory.Decision, ProjectID: "p", Label: "erased long ago"}
	if err := c.HSet(ctx, redis.PackedNodesKey(s, "p"), "gone", redis.PackNode(&gone)).Err(); err != nil {
		t.Fatal(err)
	}
	before, err := s.GetMany(ctx, append([]string{"gone"}, ids...))
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != len(ids) || before[0].Label != "Deploys run through the pipeline" {
		t.Fatalf("base-format reads: %+v", before)
	}
	if stale, err := redis.StaleNodeCopies(ctx, s); err != nil || len(stale) != 2 {
		t.Fatalf("stale copies before the upgrade: %v (%v), want 2", stale, err)
	}

	rep, err := s.FinishUpgrade(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.From != redis.FormatBase || rep.To != redis.FormatLatest || rep.Copies != 2 || rep.Dropped != 1 || rep.Scopes < 3 {
		t.Fatalf("FinishUpgrade = %+v, want from %d to %d, 2 copies written, 1 dropped, 3 scopes or more", rep, redis.FormatBase, redis.FormatLatest)
	}
	if f, err := s.Format(ctx); err != nil || f != redis.FormatLatest {
		t.Fatalf("format after the upgrade %d (%v)", f, err)
	}
	for what, list := range map[string]func(context.Context, *redis.Store) ([]string, error){"stale": redis.StaleNodeCopies, "missing": redis.MissingNodeCopies} {
		if got, err := list(ctx, s); err != nil || len(got) > 0 {
			t.Fatalf("%s copies after the upgrade: %v (%v)", what, got, err)
		}
	}
	after, err := s.GetMany(ctx, append([]string{"gone"}, ids...))
	if err != nil || !reflect.DeepEqual(after, before) {
		t.Fatalf("reads from the copies differ from the nodes' (%v):\n got %+v\nwant %+v", err, after, before)
	}
	// Idempotent.
	if rep, err := s.FinishUpgrade(ctx); err != nil || rep.Copies != 0 || rep.Dropped != 0 || rep.From != redis.FormatLatest {
		t.Fatalf("a second FinishUpgrade = %+v, %v", rep, err)
	}
}

// A namespace with data and no format key was written by an earlier
// version: it stays at the base format until the upgrade is finished, and
// a format set on purpose (a rollback) is kept by later starts.
func TestEnsureFormatKeepsEarlierData(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	formatNodes(t, s)
	if err := c.Del(ctx, redis.FormatKey(s)).Err(); err != nil {
		t.Fatal(err)
	}
	s2, err := redis.New(c, redis.WithNamespace(redis.Namespace(s)))
	if err != nil {
		t.Fatal(err)
	}
	if f, err := s2.EnsureFormat(ctx); err != nil || f != redis.FormatBase {
		t.Fatalf("EnsureFormat of a namespace with data = %d, %v; want %d", f, err, redis.FormatBase)
	}
	if n, err := c.Exists(ctx, redis.FormatKey(s)).Result(); err != nil || n != 0 {
		t.Fatalf("EnsureFormat wrote the format key of a namespace with data (%v)", err)
	}
	if err := s2.SetFormat(ctx, redis.FormatBase); err != nil {
		t.Fatal(err)
	}
	if f, err := s2.EnsureFormat(ctx); err != nil || f != redis.FormatBase {
		t.Fatalf("EnsureFormat after a rollback = %d, %v", f, err)
	}
}

// Another replica's rollback reaches a store's reads within its format
// TTL.
func TestRollbackReachesOtherReplicas(t *testing.T) {
	c := testClient(t)
	a := openStore(t, c)
	ctx := t.Context()
	ids := formatNodes(t, a)
	b, err := redis.New(c, redis.WithNamespace(redis.Namespace(a)))
	if err != nil {
		t.Fatal(err)
	}
	redis.SetFormatTTL(b, 50*time.Millisecond)
	labels(t, b, ids) // b reads the format: the latest
	if err := a.SetFormat(ctx, redis.FormatBase); err != nil {
		t.Fatal(err)
	}
	oldReplicaEdit(t, c, a, "p", ids[2], "Spaces in YAML")
	deadline := time.Now().Add(5 * time.Second)
	for labels(t, b, ids)[2] != "Spaces in YAML" {
		if time.Now().After(deadline) {
			t.Fatal("the other replica still reads the copies 5 s after the rollback")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Del(ctx, redis.PackedNodesKey(a, "p")).Err(); err != nil {
		t.Fatal(err)
	}
}
