package redis_test

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// A CrossProject query counts the statistics of the tenant's projects that
// hold no memory of reach anywhere without searching them; the store keeps
// what it read of those for statsTTL (statscache.go). Within it, another
// process' write to such a project is not in the statistics yet; past it,
// or after this process' own write or erasure, the answer is exactly what
// a store without the cache gives.
func TestStatisticsOfOtherProjectsAreKeptAWhile(t *testing.T) {
	c := testClient(t)
	var mu sync.Mutex
	at := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}
	advance := func(d time.Duration) {
		mu.Lock()
		at = at.Add(d)
		mu.Unlock()
	}
	s := openStore(t, c, redis.WithClock(clock))
	ctx := t.Context()
	// Another process on the same namespace, and a reader without the
	// cache: the exact answer.
	other, err := redis.New(c, redis.WithNamespace(redis.Namespace(s)))
	if err != nil {
		t.Fatal(err)
	}
	exact, err := redis.New(c, redis.WithNamespace(redis.Namespace(s)))
	if err != nil {
		t.Fatal(err)
	}
	redis.SetStatsCache(exact, false)

	const tenant = "acme"
	vocab := strings.Fields("deploy staging cluster release docker cache redis queue worker retry timeout lease vector postgres index")
	put := func(st *redis.Store, project string, from, n int) {
		t.Helper()
		var batch []memory.Node
		for i := from; i < from+n; i++ {
			label := fmt.Sprintf("%s %s %s note%d", vocab[i%len(vocab)], vocab[(i*7+3)%len(vocab)], vocab[(i*5+1)%len(vocab)], i)
			batch = append(batch, memory.Node{ID: fmt.Sprintf("%s-%d", project, i), TenantID: tenant, ProjectID: project,
				Subkind: memory.Decision, Scope: memory.ScopeProject, Label: label, Confidence: 0.9, Reach: memory.ReachHere})
		}
		if err := st.PutBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	for p := range 5 {
		put(s, fmt.Sprintf("p%d", p), 0, 20+10*p)
	}
	advance(2 * time.Second) // past statsQuiet of this store's writes
	f := memory.Filter{TenantID: tenant, ProjectID: "p0", CrossProject: true}
	terms := []string{"redis", "queue", "timeout"}
	query := func(st *redis.Store) []memory.Scored {
		t.Helper()
		got, err := st.Lexical(ctx, terms, f, 15)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatal("no hit")
		}
		return got
	}
	same := func(a, b []memory.Scored) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i].ID != b[i].ID || math.Abs(a[i].Score-b[i].Score) > 1e-9 {
				return false
			}
		}
		return true
	}
	p3 := memory.ProjectRef{Tenant: tenant, Project: "p3"}

	first := query(s)
	if want := query(exact); !same(first, want) {
		t.Fatalf("a first query %v, the exact answer %v", first, want)
	}
	if !redis.StatsKept(s, p3) {
		t.Fatal("p3's statistics were not kept")
	}

	// Another process writes to p3 many memories holding the query's
	// terms: the exact answer changes (their document frequencies lower
	// the terms' idf), this store's does not within statsTTL.
	for i := range 40 {
		put(other, "p3", 100+40*i, 1)
	}
	if err := other.PutBatch(ctx, []memory.Node{{ID: "p3-extra", TenantID: tenant, ProjectID: "p3", Subkind: memory.Decision,
		Scope: memory.ScopeProject, Label: "redis queue timeout redis queue", Confidence: 0.9, Reach: memory.ReachHere}}, nil); err != nil {
		t.Fatal(err)
	}
	changed := query(exact)
	if same(changed, first) {
		t.Fatal("the write changed no score: the test shows nothing")
	}
	advance(20 * time.Second)
	if got := query(s); !same(got, first) {
		t.Errorf("within statsTTL: %v, want the kept statistics' answer %v", got, first)
	}
	advance(11 * time.Second)
	if got := query(s); !same(got, changed) {
		t.Errorf("past statsTTL: %v, want the exact answer %v", got, changed)
	}

	// This process' own write is in its next query, and that read is not
	// kept (it may have come before the write was applied: statsQuiet);
	// one a little later is.
	p4 := memory.ProjectRef{Tenant: tenant, Project: "p4"}
	put(s, "p4", 500, 30)
	if got, want := query(s), query(exact); !same(got, want) {
		t.Errorf("after this store's write: %v, want the exact answer %v", got, want)
	}
	if redis.StatsKept(s, p4) {
		t.Error("a read right after this store's write to p4 was kept")
	}
	advance(2 * time.Second)
	if got, want := query(s), query(exact); !same(got, want) || !redis.StatsKept(s, p4) {
		t.Errorf("a read 2 s after the write: %v (kept %v), want the exact answer %v, kept", got, redis.StatsKept(s, p4), want)
	}

	// And its erasure of a project forgets what it kept of it.
	if !redis.StatsKept(s, p3) {
		t.Fatal("p3's statistics were not kept")
	}
	if _, err := s.Erase(ctx, memory.EraseScope{Tenant: tenant, Project: "p3"}, nil); err != nil {
		t.Fatal(err)
	}
	if redis.StatsKept(s, p3) {
		t.Error("an erased project's statistics are still kept")
	}
	if got, want := query(s), query(exact); !same(got, want) {
		t.Errorf("after the erasure: %v, want the exact answer %v", got, want)
	}
}

// The cache's replies are the fresh replies' for any query whose terms
// were all read before, in any order and combination (prefix expansions,
// short terms, an empty project); the cache is bounded by the lists it
// holds, dropping the projects kept longest.
func TestStatisticsCacheRepliesAsTheDictionaries(t *testing.T) {
	c := testClient(t)
	var mu sync.Mutex
	at := time.Now()
	s := openStore(t, c, redis.WithClock(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}))
	ctx := t.Context()
	vocab := strings.Fields("deploy deployment deployed deploying staging stage redis queue queued timeout timeouts retry retried de dev devops")
	var projects []memory.ProjectRef
	for p := range 3 {
		pr := memory.ProjectRef{Tenant: "acme", Project: fmt.Sprintf("p%d", p)}
		projects = append(projects, pr)
		var batch []memory.Node
		for i := range 15 + 10*p {
			label := fmt.Sprintf("%s %s %s n%d", vocab[i%len(vocab)], vocab[(i*7+3)%len(vocab)], vocab[(i*5+1)%len(vocab)], i)
			batch = append(batch, memory.Node{ID: fmt.Sprintf("%s-%d", pr.Project, i), TenantID: "acme", ProjectID: pr.Project,
				Subkind: memory.Decision, Scope: memory.ScopeProject, Label: label, Confidence: 0.9, Reach: memory.ReachHere})
		}
		if err := s.PutBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	projects = append(projects, memory.ProjectRef{Tenant: "acme", Project: "empty"})
	mu.Lock()
	at = at.Add(2 * time.Second) // past statsQuiet of the writes
	mu.Unlock()
	queries := [][]string{
		{"redis", "queue"},
		{"queue", "redis"},
		{"timeout", "redis", "deploy"},
		{"deploy", "timeout"},
		{"deployment", "deploy", "queue"},
		{"queue", "deployment", "deploy", "redis", "timeout"},
		{"de", "dev"},
		{"dev", "de", "staging"},
		{"staging", "dev"},
	}
	hits, err := redis.StatsRepliesExact(ctx, s, projects, queries)
	if err != nil {
		t.Fatal(err)
	}
	// Queries 2, 4, 6 and 9 are made of terms read before: their 4
	// projects each are answered from the cache.
	if hits < 4*len(projects) {
		t.Errorf("%d replies from the cache, want at least %d", hits, 4*len(projects))
	}
	// Bounded: with room for a few lists the oldest projects go first.
	redis.SetStatsCacheMax(s, 3)
	if _, err := redis.StatsRepliesExact(ctx, s, projects[:2], [][]string{{"redis", "queue", "retry"}}); err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, p := range projects {
		if redis.StatsKept(s, p) {
			kept++
		}
	}
	if kept != 1 {
		t.Errorf("%d projects kept with room for 3 lists, want 1 (the latest)", kept)
	}
}
