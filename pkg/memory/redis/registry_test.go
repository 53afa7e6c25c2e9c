package redis_test

import (
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
