package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/vecindex"
)

// TestEveryTableIsErased: every table of the schema has its erasure
// (eraseTables), so that a table added without one fails here.
func TestEveryTableIsErased(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	want := slices.Sorted(maps.Keys(eraseTables))
	if !slices.Equal(tables, want) {
		t.Fatalf("the schema's tables %v, the erasure's %v: give every table its erasure (erase.go)", tables, want)
	}
}

// TestEraseLeavesNoTraceInMemory: after an erasure the in-memory side
// holds nothing of the erased nodes: no head, id, gate, lexical term that
// only they held, vector (the graph index's slots are wiped), live edge,
// standing instruction or interned id. Also while the load runs and the
// graph index is not built yet (the erasure reaches the exact-search set
// the graph is built from, and the graph erases what it replays).
func TestEraseLeavesNoTraceInMemory(t *testing.T) {
	for _, mode := range []string{"loaded", "loading"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "m.db")
			s, err := Open(ctx, path, WithVectorIndex(vecindex.WithExactThreshold(4)))
			if err != nil {
				t.Fatal(err)
			}
			var erased, kept []memory.Node
			for i := range 12 {
				sess := "gone"
				if i%2 == 1 {
					sess = "kept"
				}
				n, err := s.Upsert(ctx, memory.Node{ProjectID: "p", SessionID: sess, Subkind: memory.Preference, AssertedBy: memory.AssertedUser,
					Label: fmt.Sprintf("%s marmalade%d quokka%s", sess, i, sess), Embedding: []float32{float32(i + 1), 1, float32(i % 3)}, EmbeddingModel: "m"})
				if err != nil {
					t.Fatal(err)
				}
				if sess == "gone" {
					erased = append(erased, n.Node)
				} else {
					kept = append(kept, n.Node)
				}
			}
			if _, err := s.Link(ctx, memory.Edge{Src: erased[0].ID, Dst: kept[0].ID, Relation: memory.RelatesTo}); err != nil {
				t.Fatal(err)
			}
			if mode == "loading" {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				hold := make(chan struct{})
				release := make(chan struct{})
				s, err = Open(ctx, path, WithBackgroundLoad(), WithLoadChunk(4), WithVectorIndex(vecindex.WithExactThreshold(4)),
					WithLoadHook(func(n int) {
						if n == 4 {
							close(hold)
							<-release
						}
					}))
				if err != nil {
					t.Fatal(err)
				}
				<-hold // the load has read and mirrored 4 nodes; the rest is not read yet
				go func() { time.Sleep(10 * time.Millisecond); close(release) }()
			}
			defer s.Close()
			if _, err := s.Erase(ctx, memory.EraseScope{Project: "p", Session: "gone"}, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitLoaded(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitIndexed(ctx); err != nil {
				t.Fatal(err)
			}
			x := s.idx
			x.mu.RLock()
			defer x.mu.RUnlock()
			for _, n := range erased {
				if _, ok := x.byID[n.ID]; ok {
					t.Fatalf("%s still indexed by id", n.ID)
				}
				if _, ok := x.edges[n.ID]; ok {
					t.Fatalf("%s still has live edges in memory", n.ID)
				}
			}
			if es := x.edges[kept[0].ID]; len(es) != 0 {
				t.Fatalf("the kept end still lists the erased edge: %v", es)
			}
			live := 0
			for _, h := range x.heads {
				if h == nil {
					continue
				}
				live++
				if x.strs.str(h.session) == "gone" {
					t.Fatalf("head of erased %s", h.label)
				}
			}
			if live != len(kept) {
				t.Fatalf("%d heads, want %d", live, len(kept))
			}
			for key, l := range x.convs {
				for _, rid := range l.rids {
					if x.heads[rid] == nil {
						t.Fatalf("conversation %v still lists erased row %d", key, rid)
					}
				}
			}
			onlyErased := []string{"gone", "quokkagone"}
			for i := 0; i < 12; i += 2 {
				onlyErased = append(onlyErased, fmt.Sprint("marmalade", i))
			}
			for _, term := range onlyErased {
				if _, ok := x.lex.ids[term]; ok || slices.Contains(x.lex.dict, term) || slices.Contains(x.lex.mid, term) || slices.Contains(x.lex.recent, term) {
					t.Fatalf("the lexical index still holds %q", term)
				}
			}
			if _, ok := x.lex.ids["quokkakept"]; !ok {
				t.Fatal("the lexical index lost a kept term")
			}
			if _, ok := x.strs.lookup("gone"); ok {
				t.Fatal("the erased session id is still interned")
			}
			if _, ok := x.strs.lookup("kept"); !ok {
				t.Fatal("the kept session id is no longer interned")
			}
			if _, ok := x.strs.ids["gone"]; ok || slices.Contains(x.strs.all(), "gone") {
				t.Fatal("the heads' string table still holds the erased session's name")
			}
			for _, h := range x.heads {
				if h != nil && x.strs.str(h.session) != "kept" {
					t.Fatalf("a kept head's session reads %q", x.strs.str(h.session))
				}
			}
			for _, st := range x.standing {
				for _, rid := range st {
					if x.heads[rid] == nil || x.strs.str(x.heads[rid].session) == "gone" {
						t.Fatalf("standing instruction %d is erased", rid)
					}
				}
			}
			ix := x.vecs["m"]
			if ix == nil || ix.Len() != len(kept) || ix.Tombstones() != 0 {
				t.Fatalf("vector index: %v (tombstones: erased vectors kept)", ix)
			}
			for _, n := range erased {
				for _, h := range ix.Search(n.Embedding, 20, nil) {
					if h.ID == n.ID {
						t.Fatalf("vector search returns erased %s", n.ID)
					}
				}
			}
			if x.liveBy[memory.ProjectRef{Project: "p"}] != len(kept) {
				t.Fatalf("live count %d", x.liveBy[memory.ProjectRef{Project: "p"}])
			}
		})
	}
}

// TestPurgeLeavesNoTraceInTheFiles: the texts of an erased session are in
// the database file or its write-ahead log after the delete alone (freed
// pages and free space keep them), and in neither after Purge, while the
// kept session's are.
func TestPurgeLeavesNoTraceInTheFiles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	text := func(sess string, i int) string { return fmt.Sprintf("%s-secret-%03d-wombat", sess, i) }
	for _, sess := range []string{"gone", "kept"} {
		ref := memory.SessionRef{Project: "p", Session: sess}
		for i := range 40 {
			if _, err := s.Upsert(ctx, memory.Node{ProjectID: "p", SessionID: sess, Subkind: memory.Observation,
				Label: text(sess, i), Body: strings.Repeat("padding ", 40)}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.AppendTranscript(ctx, ref, fmt.Sprint("t", i), []memory.Message{{Role: memory.RoleUser, Content: text(sess+"-said", i)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	found := func(needle string) bool {
		for _, f := range []string{path, path + "-wal"} {
			b, err := os.ReadFile(f)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(needle)) {
				return true
			}
		}
		return false
	}
	if _, err := s.Erase(ctx, memory.EraseScope{Project: "p", Session: "gone"}, nil); err != nil {
		t.Fatal(err)
	}
	left := 0
	for i := range 40 {
		if found(text("gone", i)) || found(text("gone-said", i)) {
			left++
		}
	}
	if left == 0 {
		t.Fatal("the files hold no erased text after the delete alone: this test cannot tell Purge works")
	}
	rep, err := s.Purge(ctx)
	if err != nil || len(rep.Done) == 0 {
		t.Fatalf("Purge: %+v %v", rep, err)
	}
	for i := range 40 {
		for _, needle := range []string{text("gone", i), text("gone-said", i)} {
			if found(needle) {
				t.Fatalf("%q is still in the files after Purge", needle)
			}
		}
		for _, needle := range []string{text("kept", i), text("kept-said", i)} {
			if !found(needle) {
				t.Fatalf("kept %q is not in the files", needle)
			}
		}
	}
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() != 0 {
		t.Fatalf("the write-ahead log holds %d bytes after Purge", st.Size())
	}
	// The store goes on: reads and writes.
	if _, err := s.Upsert(ctx, memory.Node{ProjectID: "p", Subkind: memory.Observation, Label: "after the purge"}); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Messages(ctx, memory.SessionRef{Project: "p", Session: "kept"}, 0, 0); err != nil || len(m) != 40 {
		t.Fatalf("kept transcript: %d %v", len(m), err)
	}
}
