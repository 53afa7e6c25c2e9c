package consolidate_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestUndoKeepsARevisionRevisedAgain: pass A revised X into Y, a later pass
// revised Y into Z. Undoing A must not reopen X beside Z (two conflicting
// live facts): both are kept and the report says why.
func TestUndoKeepsARevisionRevisedAgain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b.Open(t))
		x := f.seed(memory.Node{Subkind: memory.Observation, Label: "The user lives in Oslo."})
		f.say("I moved to Bergen.", "")
		f.srv.Enqueue(callOn(t, consolidate.ToolRevise, x.Label, map[string]any{"text": "The user lives in Bergen.", "reason": "moved"}), done())
		a := f.run()
		y := a.Pass.Entries[0].NewID
		if a.Outcome.Revised != 1 || y == "" {
			t.Fatalf("pass A %+v", a)
		}
		f.say("Now I live in Tromsø.", "")
		f.srv.Enqueue(callOn(t, consolidate.ToolRevise, "The user lives in Bergen.", map[string]any{"text": "The user lives in Tromsø.", "reason": "moved again"}), done())
		later := f.run()
		z := later.Pass.Entries[0].NewID
		if later.Outcome.Revised != 1 || z == "" {
			t.Fatalf("later pass %+v", later)
		}

		rep, err := consolidate.Undo(f.ctx, f.st, memory.ProjectRef{Project: project}, a.Pass.ID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got := f.get(x.ID); got.Live() {
			t.Errorf("X was reopened beside Z: %+v", got)
		}
		if got := f.get(y); got.SupersededBy != z || !got.ArchivedAt.IsZero() {
			t.Errorf("Y changed: superseded by %q, archived %v", got.SupersededBy, got.ArchivedAt)
		}
		if got := f.get(z); !got.Live() {
			t.Errorf("Z is not live: %+v", got)
		}
		texts := f.liveTexts()
		if len(texts) != 1 || texts["The user lives in Tromsø."] != z {
			t.Errorf("live after undo: %v", texts)
		}
		if len(rep.Kept) != 1 || !strings.Contains(rep.Kept[0], "revised again since by ["+z+"]") {
			t.Errorf("kept %q", rep.Kept)
		}
		if slices.ContainsFunc(rep.Reverted, func(s string) bool { return strings.Contains(s, "reopened") }) {
			t.Errorf("the report says reopened: %q", rep.Reverted)
		}
	})
}

// TestUndoKeepsATopicLinkedSince: a topic the pass created that a later
// link (here the extractor's) uses is not archived by the undo; one
// nobody else linked is.
func TestUndoKeepsATopicLinkedSince(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b.Open(t))
		f.say("I love sailing, and I love chess.", "")
		f.srv.Enqueue(
			call(consolidate.ToolRemember, map[string]any{"text": "The user loves sailing.", "kind": "preference", "topic": "sailing"}),
			call(consolidate.ToolRemember, map[string]any{"text": "The user loves chess.", "kind": "preference", "topic": "chess"}),
			done())
		res := f.run()
		topics := map[string]string{} // label -> id
		for _, e := range res.Pass.Entries {
			if e.Op == memory.OpRemember && e.After != nil && e.After.Subkind == memory.Topic {
				topics[e.After.Label] = e.NodeID
			}
		}
		sailing, chess := topics["sailing"], topics["chess"]
		if sailing == "" || chess == "" {
			t.Fatalf("topics %v in %+v", topics, res.Pass.Entries)
		}
		// Later, the extractor links another memory to the sailing topic.
		boat := f.seed(memory.Node{Subkind: memory.Observation, Label: "The user owns a small sailing boat."})
		if _, err := f.st.Link(f.ctx, memory.Edge{Src: boat.ID, Dst: sailing, Relation: memory.RelatedTo}); err != nil {
			t.Fatal(err)
		}
		rep, err := consolidate.Undo(f.ctx, f.st, memory.ProjectRef{Project: project}, res.Pass.ID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got := f.get(sailing); !got.ArchivedAt.IsZero() {
			t.Errorf("the topic a later link uses was archived")
		}
		if got := f.get(chess); got.ArchivedAt.IsZero() {
			t.Errorf("the topic nobody else linked was kept")
		}
		if !slices.ContainsFunc(rep.Kept, func(s string) bool {
			return strings.Contains(s, "["+sailing+"] topic \"sailing\"") && strings.Contains(s, "linked since by ["+boat.ID+"] (related_to)")
		}) {
			t.Errorf("kept %q", rep.Kept)
		}
		edges, err := f.st.Edges(f.ctx, sailing)
		if err != nil || len(edges) != 1 || edges[0].Src != boat.ID {
			t.Errorf("edges of the kept topic: %+v %v", edges, err)
		}
	})
}
