package redis_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestServerFiltersMatchVisible checks that the channels' filters (the
// filter fields both read from the vis hash) select exactly the nodes
// memory.Visible selects, over random nodes and random filters. The vector
// channel's FILTER fallback is reached only when the nearest neighbours
// fail the filter: TestVectorWidensAndFallsBack.
func TestServerFiltersMatchVisible(t *testing.T) {
	c := testClient(t)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s := openStore(t, c, redis.WithClock(func() time.Time { return now }))
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(7, 11))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }

	var nodes []memory.Node
	for i := range 90 {
		n := memory.Node{
			ID:         fmt.Sprintf("n%03d", i),
			Subkind:    memory.Subkind(pick("decision", "pattern", "observation", "preference")),
			Label:      fmt.Sprintf("shared word number %d", i),
			Confidence: []float64{0.1, 0.3, 0.5, 0.9}[rng.IntN(4)],
			Reach:      memory.Reach(pick("here", "anywhere")),
			TenantID:   pick("", "", "acme", "p"),
			Embedding:  []float32{1, rng.Float32(), rng.Float32()},
			CreatedAt:  now.Add(-time.Duration(100-i) * time.Hour),
		}
		n.EmbeddingModel = "m"
		switch rng.IntN(5) {
		case 0:
			n.Scope = memory.ScopeGlobal
		case 1:
			n.Scope, n.ProjectID, n.SessionID = memory.ScopeSession, pick("p", "q"), pick("s1", "s2")
		default:
			n.Scope, n.ProjectID, n.SessionID = memory.ScopeProject, pick("p", "q", "r"), pick("", "s1")
		}
		if rng.IntN(6) == 0 {
			n.ArchivedAt = now.Add(-time.Hour)
		}
		if rng.IntN(8) == 0 && i > 0 {
			n.SupersededBy = "n000"
		}
		switch rng.IntN(6) {
		case 0:
			n.ValidTo = now.Add(-time.Minute)
		case 1:
			n.ValidTo = now.Add(time.Minute)
		case 2:
			n.ValidTo = now
		}
		nodes = append(nodes, n)
	}
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	stored := map[string]memory.Node{}
	if err := s.Scan(ctx, func(n memory.Node) error { stored[n.ID] = n; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(nodes) {
		t.Fatalf("stored %d nodes, want %d", len(stored), len(nodes))
	}

	// Some nodes without their head's copy (as written before packing):
	// the lexical channel within a Retrieve, which judges the leaders by
	// their heads, reads their filter fields instead.
	for _, n := range nodes[:9] {
		if err := c.HDel(ctx, redis.PackedNodesKey(s, redis.Space(n.TenantID, n.ProjectID)), n.ID).Err(); err != nil {
			t.Fatal(err)
		}
	}
	selected, hidden, kept := 0, 0, 0
	for i := range 60 {
		f := memory.Filter{
			TenantID:          pick("", "acme", "p", "nobody"),
			ProjectID:         pick("p", "q", ""),
			SessionID:         pick("", "s1", "s2"),
			CrossProject:      rng.IntN(2) == 0,
			IncludeArchived:   rng.IntN(3) == 0,
			IncludeSuperseded: rng.IntN(3) == 0,
			MinConfidence:     []float64{0, 0.3, 0.6}[rng.IntN(3)],
		}
		switch rng.IntN(3) {
		case 1:
			f.Subkinds = []memory.Subkind{memory.Decision}
		case 2:
			f.Subkinds = []memory.Subkind{memory.Pattern, memory.Observation}
		}
		var want []string
		for _, n := range stored {
			if memory.Visible(&n, f, now) {
				want = append(want, n.ID)
			}
		}
		slices.Sort(want)
		selected += len(want)
		hidden += len(stored) - len(want)
		lex, err := s.Lexical(ctx, []string{"shared"}, f, 1000)
		if err != nil {
			t.Fatal(err)
		}
		vec, err := s.Vector(ctx, "m", []float32{1, 0.5, 0.5}, f, 1000)
		if err != nil {
			t.Fatal(err)
		}
		// Within a Retrieve (a head cache): the same answer, and the heads
		// it kept are those GetHeads reads.
		hctx := memory.WithHeadCache(ctx)
		lexHeads, err := s.Lexical(hctx, []string{"shared"}, f, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(lexHeads, lex) {
			t.Fatalf("filter %d %+v: lexical judged by heads\n %v\nby filter fields\n %v", i, f, lexHeads, lex)
		}
		cache := memory.HeadCacheOf(hctx)
		for _, n := range nodes {
			h, ok := cache.Get(n.ID)
			if !ok {
				continue
			}
			kept++
			want, err := s.GetHeads(ctx, []string{n.ID})
			if err != nil || len(want) != 1 || !reflect.DeepEqual(h, want[0]) {
				t.Fatalf("kept head of %s %+v, GetHeads %+v (%v)", n.ID, h, want, err)
			}
			got, err := s.GetHeads(hctx, []string{n.ID})
			if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], want[0]) {
				t.Fatalf("GetHeads from the cache of %s: %+v (%v)", n.ID, got, err)
			}
		}
		for _, ch := range []struct {
			name string
			got  []memory.Scored
		}{{"lexical", lex}, {"vector", vec}} {
			var got []string
			for _, sc := range ch.got {
				got = append(got, sc.ID)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("filter %d %+v: %s channel selected\n %v\nmemory.Visible selects\n %v", i, f, ch.name, got, want)
			}
		}
	}
	if selected == 0 || hidden == 0 || kept == 0 {
		t.Fatalf("the random filters selected %d and hid %d nodes, %d heads kept: the test proves nothing", selected, hidden, kept)
	}
	t.Logf("%d selected, %d hidden, %d heads kept", selected, hidden, kept)
}

// The lexical channel's dictionary script runs by EVALSHA in a pipeline; a
// server that lost its script cache (restart, SCRIPT FLUSH, a new shard)
// gets it loaded again.
func TestChannelsAfterScriptFlush(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	n := memory.Node{Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "p",
		Label: "flushed scripts reload", Confidence: 0.9, Embedding: []float32{1, 0, 0}, EmbeddingModel: "m"}
	if _, err := s.Upsert(ctx, n); err != nil {
		t.Fatal(err)
	}
	f := memory.Filter{ProjectID: "p"}
	for round := range 2 {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		lex, err := s.Lexical(ctx, []string{"reload"}, f, 10)
		if err != nil || len(lex) != 1 {
			t.Fatalf("round %d: lexical after SCRIPT FLUSH: %v, %v", round, lex, err)
		}
		vec, err := s.Vector(ctx, "m", []float32{1, 0.1, 0}, f, 10)
		if err != nil || len(vec) != 1 {
			t.Fatalf("round %d: vector after SCRIPT FLUSH: %v, %v", round, vec, err)
		}
	}
}
