package sqlite_test

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// TestConformanceBackgroundLoad runs the suite on stores opened with the
// load in the background (empty at open, so the load ends at once).
func TestConformanceBackgroundLoad(t *testing.T) {
	memorytest.Run(t, func(t *testing.T, now func() time.Time) memory.Store {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "memory.db"), sqlite.WithClock(now),
			sqlite.WithBackgroundLoad())
		if err != nil {
			t.Fatal(err)
		}
		// The vector channel is off until the (empty) load ends.
		if err := s.WaitLoaded(t.Context()); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestBackgroundLoad holds a background load after its first chunk, writes
// meanwhile to memories loaded, not yet loaded and new, and checks that the
// store answers from what is loaded while it loads and ends with every write
// in its indexes (lexical, vector, heads), as a store loaded at once does.
func TestBackgroundLoad(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	c := memorytest.NewBenchCorpus()
	var seeded []memory.Node
	base := time.Now().Add(-24 * time.Hour).Truncate(time.Hour)
	for i := range 300 {
		n := c.Node()
		// Four conversations of turns written together in bursts 20
		// minutes apart (ties, and gaps past memory.ConversationGap), in
		// rows out of their order.
		n.SessionID = fmt.Sprintf("s%d", i%4)
		n.CreatedAt = base.Add(time.Duration((i*5)%7) * 20 * time.Minute)
		seeded = append(seeded, n)
	}
	// A standing instruction among the rows the held load has not reached.
	rule := &seeded[280]
	rule.Subkind, rule.AssertedBy, rule.Source, rule.Confidence, rule.Scope = memory.Preference, memory.AssertedUser, memory.SourceUser, 0.9, memory.ScopeProject
	if err := s.PutBatch(ctx, seeded, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	hold, release := make(chan int), make(chan struct{})
	s, err = sqlite.Open(ctx, path, sqlite.WithBackgroundLoad(), sqlite.WithLoadChunk(100),
		sqlite.WithLoadHook(func(loaded int) {
			if loaded == 100 {
				hold <- loaded
				<-release
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var once sync.Once
	unhold := func() { once.Do(func() { close(release) }) }
	defer unhold() // before Close, which waits for the load
	<-hold         // the first 100 memories are loaded, the load waits
	st := s.LoadStatus()
	if st.Nodes || st.Vectors || st.Loaded != 100 || st.Total != 300 || st.Err != nil {
		t.Fatalf("status while held = %+v, want 100 of 300 loaded", st)
	}
	f := memory.Filter{ProjectID: memorytest.BenchProject, SessionID: seeded[0].SessionID}
	// Served from what is loaded: a loaded memory is found, one not yet
	// loaded is not.
	if got, err := s.GetMany(ctx, []string{seeded[0].ID, seeded[250].ID}); err != nil || len(got) != 1 || got[0].ID != seeded[0].ID {
		t.Fatalf("GetMany while loading = %v (%v), want only the loaded %s", ids(got), err, seeded[0].ID)
	}
	if hits, err := s.Lexical(ctx, memory.Terms(seeded[0].Label), f, 5); err != nil || len(hits) == 0 || hits[0].ID != seeded[0].ID {
		t.Fatalf("lexical while loading = %v (%v), want %s first", hits, err, seeded[0].ID)
	}
	// The vector channel is left out while the memories load.
	if hits, err := s.Vector(ctx, memorytest.BenchModel, seeded[1].Embedding, memory.Filter{ProjectID: memorytest.BenchProject, SessionID: seeded[1].SessionID}, 3); err != nil || len(hits) != 0 {
		t.Fatalf("vector while loading = %v (%v), want nothing", hits, err)
	}

	// The user's rules are loaded first, wherever their rows are.
	standing, err := s.StandingInstructions(ctx, memory.ProjectRef{Project: memorytest.BenchProject}, 100)
	if err != nil || !slices.ContainsFunc(standing, func(n memory.Node) bool { return n.ID == rule.ID }) {
		t.Fatalf("standing instructions while loading = %v (%v), want the rule of row 281 among them", ids(standing), err)
	}

	// Writes while the load is held (each waits for no chunk: the load is
	// between chunks): a loaded memory and a memory not loaded yet get new
	// text, one not loaded yet a new vector, and a new memory arrives.
	lbl0, lbl250 := "zzloadedlabel renamed", "zzpendinglabel renamed"
	if _, err := s.Update(ctx, seeded[0].ID, memory.Patch{Label: &lbl0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, seeded[250].ID, memory.Patch{Label: &lbl250}); err != nil {
		t.Fatal(err)
	}
	vec := c.Vector()
	if err := s.SetEmbedding(ctx, seeded[260].ID, memorytest.BenchModel, vec); err != nil {
		t.Fatal(err)
	}
	fresh := c.Node()
	fresh.Label = "zzfreshlabel arrived during the load"
	if _, err := s.Upsert(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	unhold()
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitIndexed(ctx); err != nil {
		t.Fatal(err)
	}
	st = s.LoadStatus()
	if !st.Nodes || !st.Vectors || st.Loaded != 300 || st.NodesIn <= 0 || st.VectorsIn < st.NodesIn {
		t.Fatalf("status after the load = %+v", st)
	}
	all := make([]string, 0, len(seeded)+1)
	for _, n := range seeded {
		all = append(all, n.ID)
	}
	all = append(all, fresh.ID)
	if got, err := s.GetMany(ctx, all); err != nil || len(got) != len(all) {
		t.Fatalf("GetMany after the load: %d of %d (%v)", len(got), len(all), err)
	}
	pf := memory.Filter{ProjectID: memorytest.BenchProject, CrossProject: true}
	for _, tc := range []struct{ term, want string }{
		{"zzloadedlabel", seeded[0].ID}, {"zzpendinglabel", seeded[250].ID}, {"zzfreshlabel", fresh.ID},
	} {
		f := pf
		f.SessionID = map[string]string{seeded[0].ID: seeded[0].SessionID, seeded[250].ID: seeded[250].SessionID, fresh.ID: fresh.SessionID}[tc.want]
		hits, err := s.Lexical(ctx, []string{tc.term}, f, 5)
		if err != nil || len(hits) != 1 || hits[0].ID != tc.want {
			t.Errorf("lexical %q = %v (%v), want only %s", tc.term, hits, err, tc.want)
		}
	}
	// The old text of the memory renamed before it was loaded is gone from
	// the BM25 index (its label ended in its unique term "n251").
	f0 := memory.Filter{ProjectID: memorytest.BenchProject, SessionID: seeded[250].SessionID}
	if hits, err := s.Lexical(ctx, []string{"n251"}, f0, 5); err != nil || slices.ContainsFunc(hits, func(h memory.Scored) bool { return h.ID == seeded[250].ID }) {
		t.Errorf("lexical of the old label = %v (%v): the loader put back the text written before it", hits, err)
	}
	// The conversation index, filled by the load and sorted at its end,
	// then written to (a batch placed all over its conversations), names
	// the neighbours that sorting every memory names.
	var later []memory.Node
	for i := range 40 {
		n := c.Node()
		n.SessionID = fmt.Sprintf("s%d", i%4)
		n.CreatedAt = base.Add(time.Duration((i*3)%7)*20*time.Minute + time.Duration(i)*time.Second)
		later = append(later, n)
		all = append(all, n.ID)
	}
	if err := s.PutBatch(ctx, later, nil); err != nil {
		t.Fatal(err)
	}
	everything, err := s.GetMany(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	checkAdjacent(t, s, everything)
	// The vector set during the load is the one in the graph.
	f260 := memory.Filter{ProjectID: memorytest.BenchProject, SessionID: seeded[260].SessionID}
	if hits, err := s.Vector(ctx, memorytest.BenchModel, vec, f260, 1); err != nil || len(hits) != 1 || hits[0].ID != seeded[260].ID || hits[0].Score < 0.999 {
		t.Errorf("vector of the embedding set during the load = %v (%v), want %s at cosine 1", hits, err, seeded[260].ID)
	}
}

func ids(ns []memory.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.ID
	}
	return out
}

// checkAdjacent holds the store's memory.Conversations to an oracle: every
// memory of nodes sorted by conversation and memory.CompareConversation,
// its neighbours those within memory.ConversationGap (nodes must be all
// of the store's memories).
func checkAdjacent(t *testing.T, s *sqlite.Store, nodes []memory.Node) {
	t.Helper()
	const k = 2
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b memory.Node) int {
		if c := cmp.Or(strings.Compare(a.TenantID, b.TenantID), strings.Compare(a.ProjectID, b.ProjectID),
			strings.Compare(a.SessionID, b.SessionID)); c != 0 {
			return c
		}
		return memory.CompareConversation(&a, &b)
	})
	gap := memory.ConversationGap.Milliseconds()
	got, err := s.Adjacent(t.Context(), nodes, k)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sorted {
		n := &sorted[i]
		var want memory.Adjacency
		for j := i - 1; j >= 0 && len(want.Before) < k && memory.SameConversation(&sorted[j], n) &&
			memory.ConversationAt(n)-memory.ConversationAt(&sorted[j]) <= gap; j-- {
			want.Before = append(want.Before, sorted[j].ID)
		}
		for j := i + 1; j < len(sorted) && len(want.After) < k && memory.SameConversation(&sorted[j], n) &&
			memory.ConversationAt(&sorted[j])-memory.ConversationAt(n) <= gap; j++ {
			want.After = append(want.After, sorted[j].ID)
		}
		if a := got[n.ID]; !slices.Equal(a.Before, want.Before) || !slices.Equal(a.After, want.After) {
			t.Fatalf("neighbours of %s: %+v, want %+v", n.ID, a, want)
		}
	}
}
