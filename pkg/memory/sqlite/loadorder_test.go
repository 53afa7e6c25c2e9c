package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// TestBackgroundLoadServesTheAskedProjectFirst: during a background load
// held after its first chunk (the global memories), a lexical read for the project the load
// would reach last asks for it, the load loads it (and the global
// memories) next, and the read answers the memories the fully loaded store
// answers, while most of the store is still unloaded. In row order (the
// load before issue 35) it answered from the first chunk: nothing of that
// project.
func TestBackgroundLoadServesTheAskedProjectFirst(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "engram.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	const projects, each = 30, 50
	var nodes []memory.Node
	for i := range 5 {
		nodes = append(nodes, memory.Node{ID: fmt.Sprintf("g%d", i), Subkind: memory.Observation, Scope: memory.ScopeGlobal,
			Label: fmt.Sprintf("global widget rule %d", i), Body: "applies everywhere"})
	}
	for j := range each {
		for p := range projects { // projects interleaved in row order
			nodes = append(nodes, memory.Node{ID: fmt.Sprintf("p%02d-%02d", p, j), Subkind: memory.Observation, Scope: memory.ScopeProject,
				ProjectID: fmt.Sprintf("p%02d", p), SessionID: "conversation", Label: fmt.Sprintf("widget note %d of p%02d", j, p), Body: "the widget works"})
		}
	}
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	const chunk = 25
	release, hold := make(chan struct{}), make(chan struct{})
	held := make(chan int, 1)
	first := true
	s, err = Open(ctx, path, WithBackgroundLoad(), WithLoadChunk(chunk), WithProjectWait(time.Minute),
		WithLoadHook(func(loaded int) {
			switch {
			case first: // the global memories (loaded before any project)
				first = false
				<-release
			case loaded == 5+each: // and then the asked project
				held <- loaded
				<-hold
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var releaseOnce, holdOnce sync.Once
	// A failed check lets the load go on, so that Close does not wait for
	// a held hook.
	defer func() {
		releaseOnce.Do(func() { close(release) })
		holdOnce.Do(func() { close(hold) })
	}()
	last := memory.ProjectRef{Project: fmt.Sprintf("p%02d", projects-1)}
	var lastNodes []memory.Node
	for _, n := range nodes {
		if n.ProjectID == last.Project {
			lastNodes = append(lastNodes, n)
		}
	}
	f := memory.Filter{ProjectID: last.Project}
	type answer struct {
		got []memory.Scored
		err error
	}
	done := make(chan answer, 1)
	go func() {
		got, err := s.Lexical(ctx, []string{"widget"}, f, 100)
		done <- answer{got, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.order.mu.Lock()
		asked := slices.Contains(s.order.asked, last)
		s.order.mu.Unlock()
		if asked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the read never asked for its project")
		}
	}
	releaseOnce.Do(func() { close(release) })
	var during answer
	select {
	case during = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the read did not return")
	}
	var adjDuring map[string]memory.Adjacency
	select {
	case loaded := <-held:
		if st := s.LoadStatus(); st.Nodes || loaded >= len(nodes) {
			t.Fatalf("the store was loaded (%d of %d) before the read answered", loaded, len(nodes))
		}
		// The asked project's conversation is in order already (the
		// retrieval's conversation neighbours), not only once the whole
		// store is loaded.
		if adjDuring, err = s.Adjacent(ctx, lastNodes, 2); err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the load did not reach the asked project")
	}
	holdOnce.Do(func() { close(hold) })
	if during.err != nil {
		t.Fatal(during.err)
	}
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	full, err := s.Lexical(ctx, []string{"widget"}, f, 100)
	if err != nil {
		t.Fatal(err)
	}
	adjFull, err := s.Adjacent(ctx, lastNodes, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(adjFull) != each || len(adjFull[lastNodes[1].ID].Before) != 1 || len(adjFull[lastNodes[1].ID].After) != 2 {
		t.Fatalf("loaded store: conversation neighbours %v", adjFull)
	}
	if !reflect.DeepEqual(adjDuring, adjFull) {
		t.Fatalf("conversation neighbours during the load (%d of %d memories) differ from the loaded store's", len(adjDuring), each)
	}
	if len(full) != each+5 {
		t.Fatalf("loaded store: %d hits, want %d", len(full), each+5)
	}
	// The same memories in the same order; the scores differ, the BM25
	// statistics being those of the documents loaded so far.
	ids := func(v []memory.Scored) []string {
		var out []string
		for _, x := range v {
			out = append(out, x.ID)
		}
		return out
	}
	if !slices.Equal(ids(during.got), ids(full)) {
		t.Fatalf("during the load: %d hits %v\nloaded: %d hits %v", len(during.got), during.got, len(full), full)
	}
}
