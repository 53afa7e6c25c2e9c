package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
)

// TestHeadsKeepNoBody: the in-memory heads hold no body but those of the
// standing instructions, while GetMany, GetHeads with FillTexts, and a
// reopened store give every body as stored.
func TestHeadsKeepNoBody(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := s.Upsert(ctx, memory.Node{Subkind: memory.Observation, ProjectID: "p", Label: "the loader",
		Body: "reads every row once\nand tokenises it"})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := s.Upsert(ctx, memory.Node{Subkind: memory.Preference, ProjectID: "p", Label: "answer tersely",
		Body: "no preamble", AssertedBy: memory.AssertedUser})
	if err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		s.idx.mu.RLock()
		ob, rb := s.idx.heads[s.idx.byID[obs.Node.ID]].body(), s.idx.heads[s.idx.byID[rule.Node.ID]].body()
		s.idx.mu.RUnlock()
		if ob != "" {
			t.Errorf("the observation's head holds its body %q", ob)
		}
		if rb != "no preamble" {
			t.Errorf("the standing instruction's head body = %q, want it kept", rb)
		}
		got, err := s.GetMany(ctx, []string{obs.Node.ID, rule.Node.ID})
		if err != nil || len(got) != 2 {
			t.Fatalf("GetMany = %v, %v", got, err)
		}
		if got[0].Body != obs.Node.Body || got[1].Body != "no preamble" {
			t.Errorf("GetMany bodies = %q, %q", got[0].Body, got[1].Body)
		}
		heads, err := s.GetHeads(ctx, []string{obs.Node.ID, rule.Node.ID})
		if err != nil || len(heads) != 2 {
			t.Fatalf("GetHeads = %v, %v", heads, err)
		}
		if heads[0].Body != "" || heads[0].Label != "the loader" {
			t.Errorf("GetHeads = %q / %q, want the label without the body", heads[0].Label, heads[0].Body)
		}
		if err := s.FillTexts(ctx, heads); err != nil {
			t.Fatal(err)
		}
		if heads[0].Body != obs.Node.Body || heads[1].Body != "no preamble" {
			t.Errorf("FillTexts bodies = %q, %q", heads[0].Body, heads[1].Body)
		}
		st, err := s.StandingInstructions(ctx, memory.ProjectRef{Project: "p"}, 0)
		if err != nil || len(st) != 1 || st[0].Body != "no preamble" {
			t.Errorf("StandingInstructions = %v, %v", st, err)
		}
	}
	check(s)
	check(s) // from the cache this time
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)
}

// TestFillTextsAfterARewrite: a head read before its node's text changed
// is filled with the node as stored now, never with its old body from the
// cache nor the new body under the old label.
func TestFillTextsAfterARewrite(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Upsert(ctx, memory.Node{Subkind: memory.Observation, ProjectID: "p", Label: "first label", Body: "first body"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Node.ID
	if _, err := s.GetMany(ctx, []string{id}); err != nil { // caches "first body"
		t.Fatal(err)
	}
	old, err := s.GetHeads(ctx, []string{id})
	if err != nil || len(old) != 1 {
		t.Fatal(old, err)
	}
	label, body := "second label", "second body"
	if _, err := s.Update(ctx, id, memory.Patch{Label: &label, Body: &body}); err != nil {
		t.Fatal(err)
	}
	if err := s.FillTexts(ctx, old); err != nil {
		t.Fatal(err)
	}
	if old[0].Label != label || old[0].Body != body {
		t.Errorf("stale head filled as %q / %q, want the stored %q / %q", old[0].Label, old[0].Body, label, body)
	}
	got, err := s.GetMany(ctx, []string{id})
	if err != nil || len(got) != 1 || got[0].Body != body {
		t.Errorf("GetMany after the rewrite = %v, %v", got, err)
	}
}

// TestTextCacheIsBounded: the cache of bodies keeps at most its size,
// least recently used out first, and an erasure drops the erased texts.
func TestTextCacheIsBounded(t *testing.T) {
	c := newTextCache(64 << 10)
	body := strings.Repeat("x", 1000)
	for i := range 1000 {
		c.put(uint32(i), fmt.Sprint(i), body)
		if c.bytes > c.max {
			t.Fatalf("after %d puts the cache holds %d bytes, more than %d", i+1, c.bytes, c.max)
		}
	}
	if _, ok := c.get(0, "0"); ok {
		t.Error("the oldest text is still cached")
	}
	if got, ok := c.get(999, "999"); !ok || got != body {
		t.Error("the newest text is not cached")
	}
	if _, ok := c.get(999, "another digest"); ok {
		t.Error("a text was served for another digest")
	}
	c.drop([]uint32{999})
	if _, ok := c.get(999, "999"); ok {
		t.Error("a dropped text is still cached")
	}
	if c.ll.Len() != len(c.byRid) {
		t.Errorf("list %d, map %d", c.ll.Len(), len(c.byRid))
	}
}

// TestEraseDropsCachedTexts: an erased memory's body leaves the text cache
// with its row.
func TestEraseDropsCachedTexts(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Upsert(ctx, memory.Node{Subkind: memory.Observation, ProjectID: "p", SessionID: "s1", Label: "a", Body: "secret body"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMany(ctx, []string{res.Node.ID}); err != nil {
		t.Fatal(err)
	}
	if len(s.texts.byRid) != 1 {
		t.Fatalf("%d texts cached, want 1", len(s.texts.byRid))
	}
	if _, err := s.Erase(ctx, memory.EraseScope{Project: "p", Session: "s1"}, nil); err != nil {
		t.Fatal(err)
	}
	if len(s.texts.byRid) != 0 || s.texts.bytes != 0 {
		t.Errorf("after the erasure the cache holds %d texts, %d bytes", len(s.texts.byRid), s.texts.bytes)
	}
}
