package redis_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// Cross-project recall reads the project registry from a copy at most
// registryTTL old: a project this process registers is seen at once, one
// that another process (replica) registers once the copy expires.
func TestCrossProjectRegistryCopy(t *testing.T) {
	c := testClient(t)
	a := openStore(t, c)
	b, err := redis.New(c, redis.WithNamespace(redis.Namespace(a))) // another replica
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	node := func(id, project string) memory.Node {
		return memory.Node{ID: id, Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: project,
			Label: "registry probe " + id, Confidence: 0.9, Reach: memory.ReachAnywhere}
	}
	f := memory.Filter{ProjectID: "home", CrossProject: true}
	found := func() []string {
		t.Helper()
		got, err := a.Lexical(ctx, []string{"registry", "probe"}, f, 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range got {
			ids = append(ids, s.ID)
		}
		slices.Sort(ids)
		return ids
	}
	if err := a.PutBatch(ctx, []memory.Node{node("h1", "home"), node("x1", "mine")}, nil); err != nil {
		t.Fatal(err)
	}
	if got := found(); !slices.Equal(got, []string{"h1", "x1"}) {
		t.Fatalf("first read: %v, want [h1 x1]", got)
	}
	// The copy is trusted: another replica's new project waits for it to expire.
	if err := b.PutBatch(ctx, []memory.Node{node("y1", "theirs")}, nil); err != nil {
		t.Fatal(err)
	}
	if got := found(); !slices.Equal(got, []string{"h1", "x1"}) {
		t.Fatalf("read within the copy's life: %v, want [h1 x1] (another replica's project waits for the copy to expire)", got)
	}
	// This process's own registration is seen at once (and the copy is read again).
	if err := a.PutBatch(ctx, []memory.Node{node("z1", "new")}, nil); err != nil {
		t.Fatal(err)
	}
	if got := found(); !slices.Equal(got, []string{"h1", "x1", "y1", "z1"}) {
		t.Fatalf("after a local registration: %v, want [h1 x1 y1 z1]", got)
	}
	// Once the copy expires, the other replica's projects are seen.
	redis.SetRegistryTTL(a, 20*time.Millisecond)
	if err := b.PutBatch(ctx, []memory.Node{node("w1", "later")}, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(40 * time.Millisecond)
	if got := found(); !slices.Equal(got, []string{"h1", "w1", "x1", "y1", "z1"}) {
		t.Fatalf("after the copy expired: %v, want [h1 w1 x1 y1 z1]", got)
	}
}

// Cross-project recall reads the other projects that hold a memory of
// reach anywhere (the reach registry, FormatReach), not every project of
// the namespace: a write that makes a memory reach anywhere adds its
// project first, an erased project leaves, and below FormatReach (a
// rollback, so an earlier version's writes, which do not mark, may come)
// every registered project is read again until FinishUpgrade rebuilds the
// registry.
func TestCrossProjectReadsProjectsOfReachAnywhere(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	const tenant = "acme"
	node := func(id, project string, r memory.Reach) memory.Node {
		return memory.Node{ID: id, TenantID: tenant, Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: project,
			Label: "reach probe " + id, Confidence: 0.9, Reach: r, Embedding: []float32{1, float32(len(id)), 0.5}, EmbeddingModel: "m3"}
	}
	var batch []memory.Node
	for i := range 6 {
		batch = append(batch, node(fmt.Sprintf("h%d", i), fmt.Sprintf("p%d", i), memory.ReachHere))
	}
	batch = append(batch, node("any2", "p2", memory.ReachAnywhere), node("other", "p9", memory.ReachAnywhere))
	batch[len(batch)-1].TenantID = "globex" // another tenant's: never read
	if err := s.PutBatch(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}
	f := memory.Filter{TenantID: tenant, ProjectID: "p0", CrossProject: true}
	check := func(when string, spaces, ids []string) {
		t.Helper()
		got, err := redis.ForeignSpaces(ctx, s, f)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]string, len(spaces))
		for i, p := range spaces {
			want[i] = redis.Space(tenant, p)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: foreign spaces read %v, want %v", when, got, want)
		}
		hits, err := s.Lexical(ctx, []string{"reach", "probe"}, f, 20)
		if err != nil {
			t.Fatal(err)
		}
		var found []string
		for _, h := range hits {
			found = append(found, h.ID)
		}
		slices.Sort(found)
		if !slices.Equal(found, ids) {
			t.Errorf("%s: cross-project recall found %v, want %v", when, found, ids)
		}
	}
	check("after the batch", []string{"p2"}, []string{"any2", "h0"})

	// An edit that makes a memory reach anywhere adds its project.
	anywhere := memory.ReachAnywhere
	if _, err := s.Update(ctx, "h4", memory.Patch{Reach: &anywhere}); err != nil {
		t.Fatal(err)
	}
	check("after h4 reaches anywhere", []string{"p2", "p4"}, []string{"any2", "h0", "h4"})

	// A rollback: every project is read, also one whose memory of reach
	// anywhere an earlier version wrote without marking it (here: taken
	// out of the registry by hand).
	if err := s.SetFormat(ctx, redis.FormatBase); err != nil {
		t.Fatal(err)
	}
	if err := c.SRem(ctx, redis.ReachKey(s), redis.Space(tenant, "p4")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, redis.AnywhereVectorsKey(s, redis.Space(tenant, "p4"), "m3")).Err(); err != nil {
		t.Fatal(err)
	}
	check("at the base format", []string{"p1", "p2", "p3", "p4", "p5"}, []string{"any2", "h0", "h4"})
	rep, err := s.FinishUpgrade(ctx)
	if err != nil || rep.Reach != 3 {
		t.Fatalf("FinishUpgrade = %+v, %v; want 3 projects of reach anywhere (p2, p4, globex's p9)", rep, err)
	}
	check("after FinishUpgrade", []string{"p2", "p4"}, []string{"any2", "h0", "h4"})
	if ok, err := c.VIsMember(ctx, redis.AnywhereVectorsKey(s, redis.Space(tenant, "p4"), "m3"), "h4").Result(); err != nil || !ok {
		t.Errorf("h4's vector not in p4's reach-anywhere vector set after FinishUpgrade (%v)", err)
	}
	// The rebuild's write of a vector it read earlier does not undo a
	// newer one: a node that holds another vector by then is left alone.
	h4 := node("h4", "p4", memory.ReachAnywhere)
	scanned := redis.VisFields(ctx, s, h4)
	stale := h4
	stale.Embedding = []float32{-1, 0, 0}
	if n, err := redis.RebuildVector(ctx, s, stale, scanned); err != nil || n != 0 {
		t.Errorf("a stale vector's rebuild = %d, %v; want 0 (left alone)", n, err)
	}
	if v, err := c.VEmb(ctx, redis.AnywhereVectorsKey(s, redis.Space(tenant, "p4"), "m3"), "h4", false).Result(); err != nil || len(v) != 3 || fmt.Sprint(v[0])[0] == '-' {
		t.Errorf("h4's vector in the reach-anywhere set after a stale rebuild: %v, %v; want the node's", v, err)
	}
	// Nor a writer's change of its reach (nor an erasure) since the scan.
	here := memory.ReachHere
	if _, err := s.Update(ctx, "h4", memory.Patch{Reach: &here}); err != nil {
		t.Fatal(err)
	}
	if n, err := redis.RebuildVector(ctx, s, h4, scanned); err != nil || n != 0 {
		t.Errorf("the rebuild of a node changed since its scan = %d, %v; want 0", n, err)
	}
	if ok, err := c.VIsMember(ctx, redis.AnywhereVectorsKey(s, redis.Space(tenant, "p4"), "m3"), "h4").Result(); err != nil || ok {
		t.Errorf("h4, of reach here now, in p4's reach-anywhere vector set after a stale rebuild (%v)", err)
	}
	anywhere = memory.ReachAnywhere
	if _, err := s.Update(ctx, "h4", memory.Patch{Reach: &anywhere}); err != nil {
		t.Fatal(err)
	}

	// An erased project leaves the registry.
	if _, err := s.Erase(ctx, memory.EraseScope{Tenant: tenant, Project: "p2"}, nil); err != nil {
		t.Fatal(err)
	}
	check("after p2's erasure", []string{"p4"}, []string{"h0", "h4"})
	if got, err := redis.ReachSpaces(ctx, s); err != nil || slices.Contains(got, redis.Space(tenant, "p2")) {
		t.Errorf("reach registry after p2's erasure: %v %v", got, err)
	}
}
