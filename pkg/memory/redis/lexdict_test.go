package redis_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
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

// TestDictFieldMatchesScript: the field of a term's bucket in the
// dictionary versions hash is computed alike in Go (the reads) and in the
// scripts (the writes), for short, long, multibyte and high-byte terms.
func TestDictFieldMatchesScript(t *testing.T) {
	c := testClient(t)
	terms := []string{"", "a", "xu", "bob", "elm", "deploy", "déploiement", "日本語", "\xff\xfe\x80", "\x00\x01z", "1234"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		b := make([]byte, 1+r.IntN(4))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		terms = append(terms, string(b))
	}
	inGo, inLua, err := redis.DictFields(t.Context(), c, terms)
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]bool{}
	for i := range terms {
		if inGo[i] != inLua[i] {
			t.Errorf("term %q: field %q in Go, %q in the scripts", terms[i], inGo[i], inLua[i])
		}
		fields[inGo[i]] = true
	}
	if len(fields) < 400 { // 511 buckets (about 480 distinct fields expected among 4096)
		t.Errorf("only %d distinct fields for %d terms", len(fields), len(terms))
	}
}

// TestSessionErasureLeavesNoTermsInVersions: the dictionary versions hash
// names no term of an erased session's memories (its fields were once the
// terms' first three bytes, so a term of up to three bytes outlived the
// erasure whole).
func TestSessionErasureLeavesNoTermsInVersions(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	keep := memory.Node{ID: "k", Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "p", SessionID: "other",
		Label: "release", Body: "notes", Confidence: 0.9}
	secret := memory.Node{ID: "x", Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "p", SessionID: "s1",
		Label: "Bob Xu", Body: "lives at Elm street 7", Confidence: 0.9}
	if err := s.PutBatch(ctx, []memory.Node{keep, secret}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Erase(ctx, memory.EraseScope{Project: "p", Session: "s1"}, nil); err != nil {
		t.Fatal(err)
	}
	fields, err := c.HKeys(ctx, redis.DictionaryVersionsKey(s, "p")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(fields) == 0 {
		t.Fatal("no dictionary versions at all: the test checks nothing")
	}
	secretTerms := memory.Terms(secret.Label + " " + secret.Body)
	for _, f := range fields {
		for _, w := range secretTerms {
			if f == w || strings.HasPrefix(w, f) {
				t.Errorf("after the session's erasure the dictionary versions hold field %q (of %q)", f, w)
			}
		}
	}
}

// TestDictionaryChurnOfSmallWrites: a write of one memory with one new
// word (what extraction does after a turn) sets the version of the new
// word's bucket only, so the next query on the same topic keeps its
// cached ranges: as many dictionary script calls (EVALSHA of
// lexDictScript, counted in the queries only) with a write before each
// query as without. (A ZADD that added any term once set the versions of
// all its terms' buckets: 80 script calls in 40 queries instead of 8.)
func TestDictionaryChurnOfSmallWrites(t *testing.T) {
	h := &cmdHook{}
	c := hookedClient(t, h)
	s := openStore(t, c)
	ctx := t.Context()
	var seed []memory.Node
	for i := range 200 {
		seed = append(seed, memory.Node{ID: fmt.Sprintf("s%d", i), Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "p",
			Label: fmt.Sprintf("deploy staging cluster pipeline rollout %d", i), Body: "kubernetes helm release notes", Confidence: 0.9})
	}
	if err := s.PutBatch(ctx, seed, nil); err != nil {
		t.Fatal(err)
	}
	f := memory.Filter{ProjectID: "p"}
	q := []string{"deploy", "staging", "cluster", "rollout"}
	const turns = 40
	var calls [2]int64
	for pass, withWrites := range []bool{false, true} {
		h.evalsha.Store(0)
		h.dictScript.Store(0)
		h.trips.Store(0)
		for i := range turns {
			if withWrites {
				n := memory.Node{ID: fmt.Sprintf("w%d", i), Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "p",
					Label: fmt.Sprintf("deploy staging cluster rollout for customer%c%c", 'a'+i/26, 'a'+i%26), Body: "helm release", Confidence: 0.9}
				if err := s.PutBatch(ctx, []memory.Node{n}, nil); err != nil {
					t.Fatal(err)
				}
			}
			h.count.Store(true)
			if _, err := s.Lexical(ctx, q, f, 10); err != nil {
				t.Fatal(err)
			}
			h.count.Store(false)
		}
		calls[pass] = h.dictScript.Load()
		t.Logf("with writes %v: %d dictionary script calls, %d script calls in all and %d round trips in %d queries",
			withWrites, calls[pass], h.evalsha.Load(), h.trips.Load(), turns)
	}
	if calls[1] > calls[0]+2 {
		t.Errorf("a one-memory write before each query: %d dictionary script calls, %d without", calls[1], calls[0])
	}
}
