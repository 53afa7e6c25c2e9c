package redis_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// From FormatReach a cross-project lexical read takes another project's
// reach-anywhere postings instead of its posting lists, and a vector read
// its reach-anywhere vector set instead of the whole set; of a project
// holding no memory of reach anywhere only the statistics are read. Where the lists
// are read whole (small projects: within the budget) and the sets are
// small, both are exact, so the answers must be the same: the same
// memories with the same scores,
// through writes that add, edit (text and reach), archive and erase
// memories of every project. The cleanup checks that every memory of reach
// anywhere is in the postings of each of its terms (MissingReach).
func TestReachAnywherePostingsReadLikeTheLists(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(46, 1))
	const tenant = "acme"
	vocab := strings.Fields("deploy staging cluster argo release make docker image cache redis queue worker retry " +
		"backoff timeout lease journal summary vector postgres index shard replica failover token budget prompt " +
		"model ollama embed quantise latency throughput pnpm yarn lint format test fixture golden")
	words := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = vocab[rng.IntN(len(vocab))]
		}
		return strings.Join(w, " ")
	}
	vec := func() []float32 {
		v := make([]float32, 8)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	reach := func() memory.Reach {
		if rng.IntN(4) == 0 {
			return memory.ReachAnywhere
		}
		return memory.ReachHere
	}
	var ids []string
	for p := range 8 {
		var batch []memory.Node
		for i := range 60 {
			n := memory.Node{ID: fmt.Sprintf("p%d-%d", p, i), TenantID: tenant, ProjectID: fmt.Sprintf("p%d", p),
				Subkind: memory.Decision, Scope: memory.ScopeProject, Label: words(3 + rng.IntN(6)), Confidence: 0.9, Reach: reach(),
				Embedding: vec(), EmbeddingModel: "m8"}
			if p >= 5 {
				n.Reach = memory.ReachHere // p5-p7: only their statistics count (statsTags)
			}
			if rng.IntN(10) == 0 {
				n.Scope, n.SessionID = memory.ScopeSession, "s1"
			}
			batch = append(batch, n)
			ids = append(ids, n.ID)
		}
		if err := s.PutBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	compare := func(when string) {
		t.Helper()
		for q := range 12 {
			terms := strings.Fields(words(1 + q%4))
			f := memory.Filter{TenantID: tenant, ProjectID: fmt.Sprintf("p%d", q%5), SessionID: "s1", CrossProject: true}
			redis.SetNoAnywherePostings(s, true)
			lists, err := s.Lexical(ctx, terms, f, 30)
			if err != nil {
				t.Fatal(err)
			}
			redis.SetNoAnywherePostings(s, false)
			postings, err := s.Lexical(ctx, terms, f, 30)
			if err != nil {
				t.Fatal(err)
			}
			same := len(lists) == len(postings)
			for i := 0; same && i < len(lists); i++ {
				same = lists[i].ID == postings[i].ID && math.Abs(lists[i].Score-postings[i].Score) < 1e-9
			}
			if !same {
				t.Errorf("%s, query %v from %s: the lists give %v, the reach-anywhere postings %v", when, terms, f.ProjectID, lists, postings)
			}
			foreign := 0
			for _, h := range postings {
				if !strings.HasPrefix(h.ID, f.ProjectID+"-") {
					foreign++
				}
			}
			if q == 0 && foreign == 0 {
				t.Logf("%s: query %v found no other project's memory", when, terms)
			}
			// The vector channel likewise (the reach-anywhere vector sets).
			qv := vec()
			redis.SetNoAnywherePostings(s, true)
			whole, err := s.Vector(ctx, "m8", qv, f, 20)
			if err != nil {
				t.Fatal(err)
			}
			redis.SetNoAnywherePostings(s, false)
			subset, err := s.Vector(ctx, "m8", qv, f, 20)
			if err != nil {
				t.Fatal(err)
			}
			same = len(whole) == len(subset)
			for i := 0; same && i < len(whole); i++ {
				same = whole[i].ID == subset[i].ID && math.Abs(whole[i].Score-subset[i].Score) < 1e-6
			}
			if !same {
				t.Errorf("%s, a vector query from %s: the whole sets give %v, the reach-anywhere sets %v", when, f.ProjectID, whole, subset)
			}
		}
	}
	compare("after the batches")

	anywhere, here := memory.ReachAnywhere, memory.ReachHere
	for i := range 120 {
		id := ids[rng.IntN(len(ids))]
		var err error
		switch i % 4 {
		case 0:
			if strings.HasPrefix(id, "p6-") || strings.HasPrefix(id, "p7-") {
				continue // p6 and p7 stay without memories of reach anywhere
			}
			_, err = s.Update(ctx, id, memory.Patch{Reach: &anywhere})
		case 1:
			_, err = s.Update(ctx, id, memory.Patch{Reach: &here})
		case 2:
			label := words(3 + rng.IntN(6))
			if _, err = s.Update(ctx, id, memory.Patch{Label: &label}); err == nil && rng.IntN(2) == 0 {
				err = s.SetEmbedding(ctx, id, "m8", vec()) // else left without one, as a text edit leaves it
			}
		case 3:
			err = s.Archive(ctx, id)
		}
		if err != nil && !strings.Contains(err.Error(), "already holds this content") {
			t.Fatalf("edit %d of %s: %v", i, id, err)
		}
	}
	compare("after the edits")
	if _, err := s.Erase(ctx, memory.EraseScope{Tenant: tenant, Project: "p1", Session: "s1"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Erase(ctx, memory.EraseScope{Tenant: tenant, Project: "p3"}, nil); err != nil {
		t.Fatal(err)
	}
	compare("after the erasures")
	// A term with more reach-anywhere postings in a project than a read
	// takes is read from the project's list instead, with the same answer.
	redis.SetAnywhereMax(s, 3)
	compare("reading the lists of the terms with more than 3 postings of reach anywhere")
}

// TestAnywherePostingsRideWithTheHeads: another project's reach-anywhere
// postings are read in the round trip of the posting heads (a cross-project
// search costs no trip more than the project's own), and a server that lost
// the script (NOSCRIPT) gets it loaded and asked again, the answer the same.
func TestAnywherePostingsRideWithTheHeads(t *testing.T) {
	h := &cmdHook{}
	c := hookedClient(t, h)
	s := openStore(t, c)
	ctx := t.Context()
	var nodes []memory.Node
	for i := range 12 {
		nodes = append(nodes,
			memory.Node{ID: fmt.Sprintf("a%02d", i), ProjectID: "pa", Subkind: memory.Decision, Scope: memory.ScopeProject,
				Label: fmt.Sprintf("deploy the staging cluster %d", i), Confidence: 0.9, Reach: memory.ReachHere},
			memory.Node{ID: fmt.Sprintf("b%02d", i), ProjectID: "pb", Subkind: memory.Decision, Scope: memory.ScopeProject,
				Label: fmt.Sprintf("deploy with argo release %d", i), Confidence: 0.9, Reach: memory.ReachAnywhere})
	}
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	terms := []string{"deploy", "staging"}
	here := memory.Filter{ProjectID: "pa"}
	cross := memory.Filter{ProjectID: "pa", CrossProject: true}
	search := func(f memory.Filter) ([]memory.Scored, int64) {
		t.Helper()
		h.trips.Store(0)
		h.count.Store(true)
		got, err := s.Lexical(ctx, terms, f, 30)
		h.count.Store(false)
		if err != nil {
			t.Fatal(err)
		}
		return got, h.trips.Load()
	}
	search(here) // posting heads built, dictionary ranges cached
	want, _ := search(cross)
	var others int
	for _, g := range want {
		if strings.HasPrefix(g.ID, "b") {
			others++
		}
	}
	if others == 0 || len(want) != 24 {
		t.Fatalf("cross-project search found %d memories, %d of the other project's: want 24, 12", len(want), others)
	}
	_, tripsHere := search(here)
	got, tripsCross := search(cross)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("cross-project search changed between two reads:\n%v\n%v", got, want)
	}
	if tripsCross != tripsHere {
		t.Errorf("a cross-project search took %d round trips, the project's own %d: want the same", tripsCross, tripsHere)
	}
	h.spoil.Store(1) // the next EVALSHA answers NOSCRIPT
	got, _ = search(cross)
	if h.spoil.Load() >= 0 {
		t.Fatal("no script was sent: the test spoiled nothing")
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after NOSCRIPT:\n%v\nwant\n%v", got, want)
	}
}
