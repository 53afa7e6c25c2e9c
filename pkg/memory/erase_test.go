package memory

import (
	"reflect"
	"slices"
	"testing"
)

// storeMethods is every method of the Store contract with what it writes
// and how Erase erases that, or "read" for a method that writes nothing.
// TestEveryStoreMethodIsKnownToErasure fails for a method not listed, so
// that a new kind of record cannot join the contract without its
// erasure (add it to Erase in both backends, to Erased and to the
// conformance suite's Erase tests, then here).
var storeMethods = map[string]string{
	"Upsert": "nodes: Memories", "Update": "nodes", "Archive": "nodes", "Restore": "nodes", "Supersede": "nodes, edges",
	"Revise": "nodes, edges", "SetEmbedding": "vectors: Vectors", "ApplyFeedback": "nodes (counters)", "MarkStale": "nodes",
	"Touch": "nodes", "PutBatch": "nodes, edges", "Link": "edges: Edges", "Unlink": "edges (closed ones too)",
	"AppendTranscript": "messages, turns: Messages, Turns", "SaveSummary": "summaries: Summaries",
	"AdvanceCursor": "cursors: Cursors", "SetCursor": "cursors", "PutInjection": "injection records: Injections", "TakeInjection": "deletes",
	"BriefOnce": "briefing flags: Briefings", "AcquireLease": "leases: Leases", "RenewLease": "leases", "ReleaseLease": "deletes",
	"MarkEventProcessed": "processed-event records: Processed", "PutPass": "pass journals: Passes (and JournalEntries)",
	"Erase": "deletes", "Purge": "rewrites the files", "Close": "read",
	"ParkLetter":       "parked dead letters (raw messages, no scope columns): erased by internal/erase through its StoreShelf",
	"DropParkedLetter": "deletes", "ParkedLetters": "read", "CountParkedLetters": "read",

	"Get": "read", "GetMany": "read", "PendingEmbeddings": "read", "HasPendingEmbeddings": "read", "HasLiveMemory": "read",
	"Timeline": "read", "StandingInstructions": "read", "DigestOwners": "read", "Scan": "read", "Edges": "read",
	"EdgesOf": "read", "Neighbours": "read", "Lexical": "read", "Vector": "read", "ByPaths": "read", "Messages": "read",
	"LatestSummary": "read", "Cursor": "read", "GetInjection": "read", "EventProcessed": "read", "Count": "read",
	"GetPass": "read", "Passes": "read", "SessionIDs": "read", "Summaries": "read",
}

// TestEveryStoreMethodIsKnownToErasure: see storeMethods.
func TestEveryStoreMethodIsKnownToErasure(t *testing.T) {
	ty := reflect.TypeFor[Store]()
	var unknown []string
	for i := range ty.NumMethod() {
		if _, ok := storeMethods[ty.Method(i).Name]; !ok {
			unknown = append(unknown, ty.Method(i).Name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		t.Fatalf("Store methods unknown to the erasure: %v: say what they write and make Erase erase it (erase_test.go)", unknown)
	}
}

// TestScrubPass: the entries that hold an erased memory go, with the
// state; a pass that holds none is unchanged.
func TestScrubPass(t *testing.T) {
	erased := func(id string) bool { return id == "x" }
	keep := JournalEntry{Op: OpRemember, NodeID: "a"}
	p := Pass{State: []byte(`{"steps":[]}`), Entries: []JournalEntry{
		keep,
		{Op: OpRevise, NodeID: "a", NewID: "x"},
		{Op: OpLink, NodeID: "a", Edge: &Edge{Src: "a", Dst: "x"}},
		{Op: OpForget, NodeID: "b", Before: &Node{ID: "x"}},
	}}
	if removed := ScrubPass(&p, erased); len(removed) != 3 || len(p.Entries) != 1 || p.Entries[0].NodeID != "a" || p.State != nil {
		t.Fatalf("ScrubPass removed %d, left %+v", len(removed), p)
	}
	q := Pass{State: []byte(`{}`), Entries: []JournalEntry{keep}}
	if removed := ScrubPass(&q, erased); len(removed) != 0 || q.State == nil || len(q.Entries) != 1 {
		t.Fatalf("ScrubPass changed a pass that holds nothing erased: %+v", q)
	}
}

// TestEraseScope: what each scope holds.
func TestEraseScope(t *testing.T) {
	node := func(t, p, s string) *Node { return &Node{TenantID: t, ProjectID: p, SessionID: s} }
	sess := EraseScope{Tenant: "t", Project: "p", Session: "s"}
	proj := EraseScope{Tenant: "t", Project: "p"}
	ten := EraseScope{Tenant: "t"}
	for _, c := range []struct {
		sc   EraseScope
		n    *Node
		want bool
	}{
		{sess, node("t", "p", "s"), true}, {sess, node("t", "p", "s2"), false}, {sess, node("t", "", "s"), false},
		{sess, node("u", "p", "s"), false}, {proj, node("t", "p", "x"), true}, {proj, node("t", "", ""), false},
		{proj, node("t", "q", ""), false}, {ten, node("t", "", ""), true}, {ten, node("u", "", ""), false},
	} {
		if got := c.sc.HoldsNode(c.n); got != c.want {
			t.Errorf("%s holds %+v: %v", c.sc, c.n, got)
		}
	}
	if sess.HoldsProject(ProjectRef{Tenant: "t", Project: "p"}) || !proj.HoldsProject(ProjectRef{Tenant: "t", Project: "p"}) ||
		!ten.HoldsProject(ProjectRef{Tenant: "t", Project: "q"}) || ten.HoldsProject(ProjectRef{Tenant: "u", Project: "q"}) {
		t.Error("HoldsProject")
	}
	if !proj.HoldsSession(SessionRef{Tenant: "t", Project: "p", Session: "z"}) || sess.HoldsSession(SessionRef{Tenant: "t", Project: "p", Session: "z"}) {
		t.Error("HoldsSession")
	}
}
