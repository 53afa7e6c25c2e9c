package redis_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
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
		res, err := s.Upsert(t.Context(), memory.Node{Subkind: memory.Decision, ProjectID: p, Label: lbl, Body: "Why: " + lbl, Confidence: 0.8})
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

// labels are the labels of GetHeads (the turn's candidate loads).
func labels(t *testing.T, s *redis.Store, ids []string) []string {
	t.Helper()
	nodes, err := s.GetHeads(t.Context(), ids)
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
		t.Fatalf("GetHeads = %q, want %q", got, want)
	}
	if missing, err := redis.MissingNodeCopies(ctx, s); err != nil || len(missing) > 0 {
		t.Fatalf("nodes written at the latest format without a copy: %v (%v)", missing, err)
	}
	// The copies are heads: no body (GetHeads), which FillTexts reads.
	heads, err := s.GetHeads(ctx, ids)
	if err != nil || len(heads) != len(ids) || heads[0].Body != "" {
		t.Fatalf("GetHeads at the latest format: %+v (%v), want %d nodes without bodies", heads, err, len(ids))
	}
	if err := s.FillTexts(ctx, heads); err != nil || heads[0].Body != "Why: "+want[0] || heads[3].Body != "Why: "+want[3] {
		t.Fatalf("FillTexts: %+v (%v)", heads, err)
	}

	// At the latest format a load reads the copy: a copy changed behind
	// the store's back is what GetHeads returns (what a stale copy would
	// do, and why the format waits for the operator).
	planted := memory.Node{ID: ids[1], Subkind: memory.Decision, ProjectID: "p", Label: "planted"}
	if err := c.HSet(ctx, redis.PackedNodesKey(s, "p"), ids[1], redis.HeadCopy(&planted)).Err(); err != nil {
		t.Fatal(err)
	}
	if got := labels(t, s, ids); got[1] != "planted" {
		t.Fatalf("at format %d GetHeads = %q: the copy was not read", redis.FormatNodeCopies, got)
	}

	// A rollback: reads go back to the nodes' own hashes.
	if err := s.SetFormat(ctx, redis.FormatBase); err != nil {
		t.Fatal(err)
	}
	if got := labels(t, s, ids); !slices.Equal(got, want) {
		t.Fatalf("after the rollback GetHeads = %q, want %q", got, want)
	}
	oldReplicaEdit(t, c, s, "p", ids[0], "Deploys run through the pipeline")
	if got := labels(t, s, ids); got[0] != "Deploys run through the pipeline" {
		t.Fatalf("at the base format an earlier version's edit is not read: %q", got)
	}
	if err := s.SetFormat(ctx, redis.FormatNodeCopies); err == nil {
		t.Fatal("SetFormat raised the format without the rebuild")
	}
	// (The planted and stale copies would fail openStore's check.)
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
	// And one of another tenant (a space of its own, on a tag of its own).
	res, err := s.Upsert(ctx, memory.Node{Subkind: memory.Decision, TenantID: "acme", ProjectID: "p", Label: "Acme deploys on Fridays", Confidence: 0.8})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, res.Node.ID)
	if err := s.SetFormat(ctx, redis.FormatBase); err != nil {
		t.Fatal(err)
	}
	// What replicas of an earlier version leave: nodes with no copy (written
	// by them), a stale copy (one edited by them), the copy of a node they
	// erased.
	if err := c.HDel(ctx, redis.PackedNodesKey(s, "q"), ids[3]).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.HDel(ctx, redis.PackedNodesKey(s, redis.Space("acme", "p")), ids[4]).Result(); err != nil || n != 1 {
		t.Fatalf("the other tenant's node had no copy to remove (%v)", err)
	}
	oldReplicaEdit(t, c, s, "p", ids[0], "Deploys run through the pipeline")
	gone := memory.Node{ID: "gone", Subkind: memory.Decision, ProjectID: "p", Label: "erased long ago"}
	if err := c.HSet(ctx, redis.PackedNodesKey(s, "p"), "gone", redis.HeadCopy(&gone)).Err(); err != nil {
		t.Fatal(err)
	}
	dfs := docFreqDamage(t, c, s, "staging", "deploys")
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
	if rep.From != redis.FormatBase || rep.To != redis.FormatLatest || rep.Copies != 3 || rep.Dropped != 1 || rep.Scopes < 4 || rep.DocFreqs != dfs {
		t.Fatalf("FinishUpgrade = %+v, want from %d to %d, 3 copies written, 1 dropped, 4 scopes or more, %d document frequencies", rep, redis.FormatBase, redis.FormatLatest, dfs)
	}
	checkDocFreqs(t, ctx, s)
	if f, err := s.Format(ctx); err != nil || f != redis.FormatLatest {
		t.Fatalf("format after the upgrade %d (%v)", f, err)
	}
	for what, list := range map[string]func(context.Context, *redis.Store) ([]string, error){"stale": redis.StaleNodeCopies, "missing": redis.MissingNodeCopies} {
		if got, err := list(ctx, s); err != nil || len(got) > 0 {
			t.Fatalf("%s copies after the upgrade: %v (%v)", what, got, err)
		}
	}
	after, err := s.GetHeads(ctx, append([]string{"gone"}, ids...))
	for i := range before {
		before[i].Body = "" // the copies are heads
	}
	if err != nil || !reflect.DeepEqual(after, before) {
		t.Fatalf("reads from the copies differ from the nodes' (%v):\n got %+v\nwant %+v", err, after, before)
	}
	// Idempotent.
	if rep, err := s.FinishUpgrade(ctx); err != nil || rep.Copies != 0 || rep.Dropped != 0 || rep.DocFreqs != 0 || rep.From != redis.FormatLatest {
		t.Fatalf("a second FinishUpgrade = %+v, %v", rep, err)
	}
}

// A namespace starts at the base format, an empty one too (no replica can
// know that none of an earlier version will write it), and reads answer
// there; FinishUpgrade never lowers a format newer than this version's.
func TestFormatStartsAtBaseAndIsNeverLowered(t *testing.T) {
	c := testClient(t)
	ctx := t.Context()
	ns := randomNamespace()
	t.Cleanup(func() { _ = redis.DeleteNamespace(context.Background(), c, ns) })
	s, err := redis.New(c, redis.WithNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	if f, err := s.Format(ctx); err != nil || f != redis.FormatBase {
		t.Fatalf("the format of a new namespace = %d, %v; want %d", f, err, redis.FormatBase)
	}
	ids := formatNodes(t, s)
	if n, err := c.Exists(ctx, redis.FormatKey(s)).Result(); err != nil || n != 0 {
		t.Fatalf("writes set the format key (%v)", err)
	}
	if got := labels(t, s, ids); len(got) != len(ids) || got[0] != "Deploys run through make release" {
		t.Fatalf("GetHeads at the base format = %q", got)
	}
	newer := strconv.Itoa(redis.FormatLatest + 1)
	if err := c.Set(ctx, redis.FormatKey(s), newer, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishUpgrade(ctx); err == nil {
		t.Fatal("FinishUpgrade lowered a newer format")
	}
	if v, err := c.Get(ctx, redis.FormatKey(s)).Result(); err != nil || v != newer {
		t.Fatalf("format after a refused FinishUpgrade: %q (%v)", v, err)
	}
	if err := s.SetFormat(ctx, redis.FormatBase); err != nil { // a rollback, from any format
		t.Fatal(err)
	}
	if f, err := s.Format(ctx); err != nil || f != redis.FormatBase {
		t.Fatalf("format after the rollback = %d, %v", f, err)
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
	// (The stale copy would fail openStore's check.)
	if err := c.Del(ctx, redis.PackedNodesKey(a, "p")).Err(); err != nil {
		t.Fatal(err)
	}
}

// FinishUpgrade over many pages (1,500 nodes: ZSCAN and HSCAN answer in
// pages past 128), with the damage an earlier version leaves (a seventh of
// the copies missing, an eleventh stale, 300 orphans), while writers of
// this version edit nodes and erase a session: no copy is left stale or
// missing. (From the review of stop 44.)
func TestFinishUpgradeBesideWriters(t *testing.T) {
	t.Run("standalone", func(t *testing.T) { finishBeside(t, testClient(t)) })
	t.Run("cluster", func(t *testing.T) { finishBeside(t, testCluster(t)) })
}

func finishBeside(t *testing.T, c goredis.UniversalClient) {
	s := openStore(t, c)
	ctx := t.Context()
	var ids []string
	var batch []memory.Node
	for i := 0; i < 1500; i++ {
		n, err := memory.PrepareNew(memory.Node{Subkind: memory.Decision, ProjectID: "p", SessionID: fmt.Sprintf("s%d", i%10), Label: fmt.Sprintf("fact number %d about things", i), Confidence: 0.8}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, n)
		ids = append(ids, n.ID)
	}
	if err := s.PutBatch(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFormat(ctx, redis.FormatBase); err != nil {
		t.Fatal(err)
	}
	// old-version damage: every 7th copy removed, every 11th stale, orphans
	pn := redis.PackedNodesKey(s, "p")
	for i, id := range ids {
		switch {
		case i%7 == 0:
			c.HDel(ctx, pn, id)
		case i%11 == 0:
			c.HSet(ctx, pn, id, redis.HeadCopy(&memory.Node{ID: id, ProjectID: "p", Subkind: memory.Decision, Label: "stale"}))
		}
	}
	for i := 0; i < 300; i++ {
		c.HSet(ctx, pn, fmt.Sprintf("orphan%d", i), "x")
	}
	// and the document frequencies: a third of the terms' missing, a
	// tenth wrong, 300 of terms gone
	dfk := redis.DocFreqsKey(s, "p")
	terms, err := c.HKeys(ctx, dfk).Result()
	if err != nil || len(terms) < 1000 {
		t.Fatalf("%d document frequencies (%v)", len(terms), err)
	}
	for i, term := range terms {
		switch {
		case i%3 == 0:
			c.HDel(ctx, dfk, term)
		case i%10 == 0:
			c.HIncrBy(ctx, dfk, term, 5)
		}
	}
	for i := 0; i < 300; i++ {
		c.HSet(ctx, dfk, fmt.Sprintf("goneterm%d", i), 2)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				id := ids[(j*37+w*101)%len(ids)]
				lbl := fmt.Sprintf("edited %d %d", w, j)
				if _, err := s.Update(ctx, id, memory.Patch{Label: &lbl}); err != nil && !errors.Is(err, memory.ErrNotFound) {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := s.Erase(ctx, memory.EraseScope{Project: "p", Session: "s3"}, nil); err != nil {
			t.Error(err)
		}
	}()
	var reports []redis.UpgradeReport
	rep, err := s.FinishUpgrade(ctx, func(done redis.UpgradeReport, scopes int) {
		if scopes < 2 {
			t.Errorf("progress over %d scopes", scopes)
		}
		reports = append(reports, done)
	})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
	// Progress after every page: 1,500 nodes take several.
	if len(reports) < 3 || reports[len(reports)-1].Nodes != rep.Nodes || rep.Nodes < 1500-150 {
		t.Errorf("progress: %d reports, the last %+v, the result %+v", len(reports), reports[len(reports)-1:], rep)
	}
	for what, list := range map[string]func(context.Context, *redis.Store) ([]string, error){"stale": redis.StaleNodeCopies, "missing": redis.MissingNodeCopies} {
		if got, err := list(ctx, s); err != nil || len(got) > 0 {
			t.Errorf("%s copies after the upgrade: %d (%v)", what, len(got), err)
		}
	}
	checkDocFreqs(t, ctx, s)
}

// At format 2, nodes of the per-attribute form and nodes whose copy is
// missing come from their own hashes, in the order asked, projects
// interleaved, duplicates once, bodies blank; FillTexts fills them. (From
// the second review of stop 44: without it, skipping that read or keeping
// its bodies went unnoticed.)
func TestHeadsFallBackToTheNodes(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	var ids []string
	for i, lbl := range []string{"alpha one", "beta two", "alpha three", "beta four", "alpha five"} {
		p := "a"
		if i%2 == 1 {
			p = "b"
		}
		res, err := s.Upsert(ctx, memory.Node{Subkind: memory.Decision, ProjectID: p, Label: lbl, Body: "body of " + lbl, Confidence: 0.8})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Node.ID)
	}
	// ids[0]: legacy per-attribute hash, no copy; ids[3]: packed, copy missing.
	want0, err := s.Get(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	key := redis.NodeKey(s, "a", ids[0])
	if err := c.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, key, redis.LegacyHash(&want0)).Err(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct{ p, id string }{{"a", ids[0]}, {"b", ids[3]}} {
		if n, err := c.HDel(ctx, redis.PackedNodesKey(s, d.p), d.id).Result(); err != nil || n != 1 {
			t.Fatalf("no copy of %s to remove (%v)", d.id, err)
		}
	}

	ask := []string{ids[3], ids[0], "nope", ids[1], ids[3], ids[4], ids[2], ids[0]}
	heads, err := s.GetHeads(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	many, err := s.GetMany(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	for i := range many {
		many[i].Body = ""
	}
	if !reflect.DeepEqual(heads, many) {
		t.Fatalf("heads differ from GetMany without bodies:\n got %+v\nwant %+v", heads, many)
	}
	if err := s.FillTexts(ctx, heads); err != nil {
		t.Fatal(err)
	}
	for _, h := range heads {
		if h.Body != "body of "+h.Label {
			t.Fatalf("FillTexts: %q / %q", h.Label, h.Body)
		}
	}
	// (repair for openStore's end check)
	if _, err := s.FinishUpgrade(ctx); err != nil {
		t.Fatal(err)
	}
}
