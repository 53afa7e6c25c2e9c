package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

func open(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReopen checks that everything the in-memory indexes serve is rebuilt
// from the file at open.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path)
	pref, err := s.Upsert(ctx, memory.Node{Subkind: memory.Preference, ProjectID: "p", Label: "answer tersely",
		AssertedBy: memory.AssertedUser, Paths: []string{"README.md"}})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := s.Upsert(ctx, memory.Node{Subkind: memory.Observation, ProjectID: "p", Label: "configuration loader is slow",
		Embedding: []float32{1, 0, 0}, EmbeddingModel: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Archive(ctx, pref.Node.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(ctx, pref.Node.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Link(ctx, memory.Edge{Src: pref.Node.ID, Dst: obs.Node.ID, Relation: memory.RelatesTo}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s = open(t, path)
	defer s.Close()
	f := memory.Filter{ProjectID: "p"}
	lex, err := s.Lexical(ctx, []string{"config"}, f, 10) // prefix of "configuration"
	if err != nil || len(lex) != 1 || lex[0].ID != obs.Node.ID {
		t.Fatalf("lexical after reopen (prefix): %v %v", lex, err)
	}
	vs, err := s.Vector(ctx, "m", []float32{1, 0.1, 0}, f, 10)
	if err != nil || len(vs) != 1 || vs[0].ID != obs.Node.ID {
		t.Fatalf("vector after reopen: %v %v", vs, err)
	}
	st, err := s.StandingInstructions(ctx, memory.ProjectRef{Project: "p"}, 6)
	if err != nil || len(st) != 1 || st[0].ID != pref.Node.ID {
		t.Fatalf("standing after reopen: %v %v", st, err)
	}
	ps, err := s.ByPaths(ctx, []string{"README.md"}, f, 10)
	if err != nil || len(ps) != 1 {
		t.Fatalf("paths after reopen: %v %v", ps, err)
	}
	if ok, _ := s.HasLiveMemory(ctx, memory.ProjectRef{Project: "p"}); !ok {
		t.Fatal("live memory lost")
	}
	pend, err := s.PendingEmbeddings(ctx, "m", 10)
	if err != nil || len(pend) != 1 || pend[0].ID != pref.Node.ID {
		t.Fatalf("pending after reopen: %v %v", pend, err)
	}
	nb, err := s.Neighbours(ctx, pref.Node.ID, 1, f)
	if err != nil || len(nb) != 1 || nb[0].Node.ID != obs.Node.ID {
		t.Fatalf("neighbours after reopen: %v %v", nb, err)
	}
	r, err := s.Upsert(ctx, memory.Node{Subkind: memory.Observation, ProjectID: "p", Label: "Configuration loader is slow"})
	if err != nil || r.Created {
		t.Fatalf("digest index after reopen: %+v %v", r, err)
	}
}

func TestPrefixOnlyForLongTerms(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "m.db"))
	defer s.Close()
	long, _ := s.Upsert(ctx, memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "golang generics"})
	exact, _ := s.Upsert(ctx, memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "go modules"})
	f := memory.Filter{ProjectID: "p"}
	got, err := s.Lexical(ctx, []string{"go"}, f, 10)
	if err != nil || len(got) != 1 || got[0].ID != exact.Node.ID {
		t.Fatalf("2-letter term must match whole tokens only: %v %v", got, err)
	}
	got, err = s.Lexical(ctx, []string{"gola"}, f, 10)
	if err != nil || len(got) != 1 || got[0].ID != long.Node.ID {
		t.Fatalf("prefix: %v %v", got, err)
	}
	exactToo, _ := s.Upsert(ctx, memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "gola library"})
	got, _ = s.Lexical(ctx, []string{"gola"}, f, 10)
	if len(got) != 2 || (got[0].ID != exactToo.Node.ID && got[1].ID != exactToo.Node.ID) {
		t.Fatalf("prefix and exact matches: %v", got)
	}
}

func TestOneProcessPerFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path)
	if _, err := sqlite.Open(context.Background(), path); err == nil {
		t.Fatal("a second Open of the same file succeeded")
	}
	s.Close()
	s2 := open(t, path)
	s2.Close()
}

func TestSchemaVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	open(t, path).Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v < 1 {
		t.Fatalf("user_version %d %v", v, err)
	}
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v+5)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlite.Open(context.Background(), path); err == nil {
		t.Fatal("opened a database from a newer schema")
	}
}

// TestConcurrentUse runs writers and readers together; with -race it checks
// the index locking.
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "m.db"))
	defer s.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				r, err := s.Upsert(ctx, memory.Node{Subkind: memory.Observation, ProjectID: "p",
					Label: fmt.Sprintf("writer %d note %d about caching", w, i), Paths: []string{fmt.Sprintf("f%d.go", i%5)},
					Embedding: []float32{float32(w + 1), float32(i + 1), 1}, EmbeddingModel: "m"})
				if err != nil {
					errs <- err
					return
				}
				if i%5 == 0 {
					if err := s.Archive(ctx, r.Node.ID); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := memory.Filter{ProjectID: "p"}
			for range 50 {
				if _, err := s.Lexical(ctx, []string{"caching"}, f, 10); err != nil {
					errs <- err
					return
				}
				if _, err := s.Vector(ctx, "m", []float32{1, 1, 1}, f, 10); err != nil {
					errs <- err
					return
				}
				if _, err := s.Timeline(ctx, memory.TimelineQuery{Filter: f, Limit: 5}); err != nil {
					errs <- err
					return
				}
				if _, err := s.MarkStale(ctx, memory.ProjectRef{Project: "p"}, []string{"f1.go"}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	tl, err := s.Timeline(ctx, memory.TimelineQuery{Filter: memory.Filter{ProjectID: "p"}, Limit: 1000})
	if err != nil || len(tl) != 80 {
		t.Fatalf("live nodes after concurrent writes: %d %v", len(tl), err)
	}
}

func TestClosedStore(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "m.db"))
	s.Close()
	_, err := s.Get(context.Background(), "x")
	if err == nil || errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("Get on a closed store: %v", err)
	}
	// The reads served from the in-memory heads fail too.
	if _, err := s.GetMany(context.Background(), []string{"x"}); err == nil {
		t.Fatal("GetMany on a closed store succeeded")
	}
	if _, err := s.StandingInstructions(context.Background(), memory.ProjectRef{Project: "p"}, 6); err == nil {
		t.Fatal("StandingInstructions on a closed store succeeded")
	}
	if _, err := s.EdgesOf(context.Background(), []string{"x"}); err == nil {
		t.Fatal("EdgesOf on a closed store succeeded")
	}
	if _, err := s.HasPendingEmbeddings(context.Background(), memory.ProjectRef{Project: "p"}, "m"); err == nil {
		t.Fatal("HasPendingEmbeddings on a closed store succeeded")
	}
}

func TestPutBatchMixedDimensions(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "m.db"))
	defer s.Close()
	err := s.PutBatch(ctx, []memory.Node{
		{ID: "a", Subkind: memory.Decision, ProjectID: "p", Label: "a", Embedding: []float32{1, 0}, EmbeddingModel: "m"},
		{ID: "b", Subkind: memory.Decision, ProjectID: "p", Label: "b", Embedding: []float32{1, 0, 0}, EmbeddingModel: "m"},
	}, nil)
	if !errors.Is(err, memory.ErrInvalid) {
		t.Fatalf("mixed dimensions in one batch: %v", err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("rejected batch stored a node: %v", err)
	}
}

// TestBackgroundVectorBuild reopens a store with more vectors than the exact
// threshold of the graph index, writes while the graph is being built, and
// checks the vector channel before and after the build.
func TestBackgroundVectorBuild(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path)
	rng := rand.New(rand.NewPCG(1, 2))
	randVec := func() []float32 {
		v := make([]float32, 16)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	var nodes []memory.Node
	for i := range 3000 {
		nodes = append(nodes, memory.Node{ID: fmt.Sprintf("n%d", i), Subkind: memory.Observation, ProjectID: "p",
			Label: fmt.Sprintf("node %d", i), Embedding: randVec(), EmbeddingModel: "m"})
	}
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = open(t, path)
	defer s.Close()
	f := memory.Filter{ProjectID: "p"}
	q := randVec()
	fresh, err := s.Upsert(ctx, memory.Node{Subkind: memory.Observation, ProjectID: "p", Label: "fresh", Embedding: q, EmbeddingModel: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetEmbedding(ctx, "n0", "other", []float32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		hits, err := s.Vector(ctx, "m", q, f, 5)
		if err != nil || len(hits) == 0 || hits[0].ID != fresh.Node.ID {
			t.Fatalf("%s: nearest of the fresh vector: %v %v", when, hits, err)
		}
		hits, err = s.Vector(ctx, "m", nodes[0].Embedding, f, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			if h.ID == "n0" {
				t.Fatalf("%s: a vector moved to another model is still searched under m", when)
			}
		}
		if hits, _ := s.Vector(ctx, "m", nodes[7].Embedding, f, 1); len(hits) != 1 || hits[0].ID != "n7" {
			t.Fatalf("%s: exact vector of n7: %v", when, hits)
		}
	}
	check("while building")
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := s.WaitIndexed(wctx); err != nil {
		t.Fatal(err)
	}
	check("after the build")
	if hits, _ := s.Vector(ctx, "other", []float32{1, 2, 3}, f, 1); len(hits) != 1 || hits[0].ID != "n0" {
		t.Fatalf("model other: %v", hits)
	}

	// closing while a build runs stops it
	s2path := filepath.Join(t.TempDir(), "m2.db")
	copyStore(t, s, s2path)
	s2 := open(t, s2path)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
}

func copyStore(t *testing.T, from *sqlite.Store, to string) {
	t.Helper()
	ctx := context.Background()
	dst := open(t, to)
	defer dst.Close()
	var nodes []memory.Node
	if err := from.Scan(ctx, func(n memory.Node) error { nodes = append(nodes, n); return nil }, func(memory.Edge) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := dst.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
}

func TestListsNameTheModel(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "m.db"))
	defer s.Close()
	r, err := s.Upsert(ctx, memory.Node{Subkind: memory.Preference, ProjectID: "p", Label: "x", AssertedBy: memory.AssertedUser,
		Embedding: []float32{1, 2}, EmbeddingModel: "m"})
	if err != nil {
		t.Fatal(err)
	}
	many, err := s.GetMany(ctx, []string{r.Node.ID})
	if err != nil || len(many) != 1 || many[0].EmbeddingModel != "m" {
		t.Fatalf("GetMany: %+v %v", many, err)
	}
	st, err := s.StandingInstructions(ctx, memory.ProjectRef{Project: "p"}, 1)
	if err != nil || len(st) != 1 || st[0].EmbeddingModel != "m" {
		t.Fatalf("standing: %+v %v", st, err)
	}
	one, err := s.Get(ctx, r.Node.ID)
	if err != nil || len(one.Embedding) != 2 {
		t.Fatalf("Get returns the vector: %+v %v", one, err)
	}
}
