package redis_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestDictionaryCacheMatchesScript: the lexical dictionary built from the
// cached prefix ranges is lexDictScript's answer, also after another
// replica (a second store on the same keys) added terms to a cached range
// (in front of its first expansions, which pushes one out) and dropped
// terms from one, on the project and on the global memories, and with a
// prefix that has more longer terms than are expanded.
func TestDictionaryCacheMatchesScript(t *testing.T) {
	c := testClient(t)
	a := openStore(t, c)
	b, err := redis.New(c, redis.WithNamespace(redis.Namespace(a)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	node := func(id, scope, session, label string) memory.Node {
		n := memory.Node{ID: id, Subkind: memory.Decision, Scope: memory.Scope(scope), SessionID: session, Label: label,
			Body: "body " + id, Confidence: 0.9}
		if n.Scope == memory.ScopeProject {
			n.ProjectID = "p"
		}
		return n
	}
	var nodes []memory.Node
	for i := range 40 { // deployab..deploybn: more than the 32 expansions
		nodes = append(nodes, node(fmt.Sprintf("d%02d", i), "project", "",
			fmt.Sprintf("deploy%c%c to run", 'a'+i/26, 'a'+i%26)))
	}
	nodes = append(nodes,
		node("r1", "project", "", "running deployment deployed"),
		node("r2", "project", "", "runner runs deploys"),
		node("g1", "global", "", "deploy deployments globally to runners"))
	if err := a.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	f := memory.Filter{ProjectID: "p"}
	queries := [][]string{{"deploy"}, {"deployments", "to"}, {"running", "run"}, {"to"}, {"zzzz"}, {"deployed", "runners", "globally"}}
	check := func(step string, s *redis.Store) {
		t.Helper()
		for _, q := range queries {
			for range 2 { // the first may fill the cache, the second reads it
				cached, script, err := redis.Dictionaries(ctx, s, f, q)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.EqualFunc(cached, script, slices.Equal) {
					t.Fatalf("%s, query %q:\ncached %q\nscript %q", step, q, cached, script)
				}
			}
		}
	}
	check("written", a)
	check("written, second replica", b)

	// The other replica adds terms at the front of deploy's range (the
	// cached one must not be used) and one in run's, in a session.
	x2 := node("x2", "global", "", "deployaa globalx")
	if err := b.PutBatch(ctx, []memory.Node{node("x1", "project", "s1", "deploy deploya runa"), x2}, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := c.HLen(ctx, redis.DictionaryVersionsKey(a, "p")).Result(); err != nil || n == 0 {
		t.Fatalf("no dictionary versions after new terms (%d, %v)", n, err)
	}
	check("terms added by another replica", a)

	// The session's erasure and an update drop them again.
	if _, err := b.Erase(ctx, memory.EraseScope{Project: "p", Session: "s1"}, nil); err != nil {
		t.Fatal(err)
	}
	x2.Label = "globalx"
	if err := b.PutBatch(ctx, []memory.Node{x2}, nil); err != nil {
		t.Fatal(err)
	}
	check("terms dropped by another replica", a)

	// An update that changes a document's terms (one term gone, one new).
	nodes[0].Label = "deployzz to run"
	if err := b.PutBatch(ctx, nodes[:1], nil); err != nil {
		t.Fatal(err)
	}
	check("a document's terms changed", a)
}
