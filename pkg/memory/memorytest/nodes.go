package memorytest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

var nodeTests = []subtest{
	{"Upsert/CreateAndGet", testUpsertCreate},
	{"Upsert/Reinforce", testUpsertReinforce},
	{"Upsert/UserTextKept", testUpsertUserText},
	{"Upsert/PerProject", testUpsertPerProject},
	{"Upsert/Invalid", testUpsertInvalid},
	{"DigestOwners", testDigestOwners},
	{"Upsert/ArchivedMatch", testUpsertArchived},
	{"Get/NotFoundAndMany", testGetMany},
	{"Get/HeadsAndTexts", testHeadsAndTexts},
	{"Embeddings/PendingPerProject", testHasPendingEmbeddings},
	{"Update", testUpdate},
	{"ArchiveRestore", testArchiveRestore},
	{"Supersede", testSupersede},
	{"Revise/AsOf", testRevise},
	{"Timeline", testTimeline},
	{"Standing", testStanding},
	{"Feedback", testFeedback},
	{"MarkStale", testMarkStale},
	{"MarkStale/Cap", testMarkStaleCap},
	{"Touch", testTouch},
	{"Embeddings/Pending", testPending},
	{"HasLiveMemory", testHasLive},
	{"PutBatch/Scan", testPutBatch},
	{"PutBatch/AllOrNothing", testPutBatchInvalid},
	{"PutBatch/SameIDTwice", testPutBatchSameIDTwice},
	{"Redaction", testRedaction},
}

func testUpsertCreate(e *env) {
	r, err := e.s.Upsert(e.ctx, memory.Node{Subkind: memory.Decision, ProjectID: "p", SessionID: "s1",
		Label: "Use WAL mode", Body: "SQLite runs in WAL mode.", Paths: []string{"db/open.go"},
		Entities: []memory.Entity{{Key: "SQLite", Name: "SQLite"}}, Confidence: 0.7})
	e.ok(err, "Upsert")
	if !r.Created || r.Node.ID == "" || r.Node.Digest == "" {
		e.t.Fatalf("created: %+v", r)
	}
	n := e.get(r.Node.ID)
	if n.Label != "Use WAL mode" || n.Body != "SQLite runs in WAL mode." || n.Scope != memory.ScopeProject ||
		n.ProjectID != "p" || n.SessionID != "s1" || n.Subkind != memory.Decision {
		e.t.Fatalf("stored: %+v", n)
	}
	if n.Digest != memory.Digest(memory.Decision, "use wal mode", "sqlite runs in wal mode.", "") {
		e.t.Fatalf("digest %q", n.Digest)
	}
	if n.Confidence != 0.7 || n.Weight != 1 || n.Source != memory.SourceAgent || n.AssertedBy != memory.AssertedInferred || n.Reach != memory.ReachHere {
		e.t.Fatalf("defaults: %+v", n)
	}
	if len(n.Paths) != 1 || n.Paths[0] != "db/open.go" || len(n.Entities) != 1 || n.Entities[0] != (memory.Entity{Key: "sqlite", Name: "SQLite"}) {
		e.t.Fatalf("paths/entities: %+v %+v", n.Paths, n.Entities)
	}
	if !timeEq(n.CreatedAt, Epoch) || !timeEq(n.UpdatedAt, Epoch) || !timeEq(n.ValidFrom, Epoch) || !n.Live() {
		e.t.Fatalf("times: %+v", n)
	}
	// a given id is kept
	g := e.upsert(memory.Node{ID: "given-id-1", Subkind: memory.Preference, Label: "global one"})
	if g.ID != "given-id-1" || e.get("given-id-1").Scope != memory.ScopeGlobal {
		e.t.Fatalf("given id: %+v", g)
	}
}

func testUpsertReinforce(e *env) {
	first := e.upsert(memory.Node{Subkind: memory.Observation, ProjectID: "p", Label: "Tests are slow",
		Body: "on CI", Confidence: 0.5, Paths: []string{"a.go"}, AssertedBy: memory.AssertedAssistant})
	marked, err := e.s.MarkStale(e.ctx, memory.ProjectRef{Project: "p"}, []string{"a.go"})
	e.ok(err, "MarkStale")
	e.sameList("marked", marked, []string{first.ID})
	e.c.Advance(time.Minute)
	r, err := e.s.Upsert(e.ctx, memory.Node{Subkind: memory.Observation, ProjectID: "p", Label: "tests  ARE slow",
		Body: "on ci", Confidence: 0.8, Reach: memory.ReachAnywhere, AssertedBy: memory.AssertedUser, Paths: []string{"b.go"}})
	e.ok(err, "re-Upsert")
	if r.Created || r.Node.ID != first.ID {
		e.t.Fatalf("not reinforced: %+v", r)
	}
	n := e.get(first.ID)
	if n.Weight != 1.25 || n.Confidence != 0.8 || n.Stale() || n.AssertedBy != memory.AssertedUser || n.Reach != memory.ReachAnywhere {
		e.t.Fatalf("reinforced: weight %v conf %v stale %v by %s reach %s", n.Weight, n.Confidence, n.Stale(), n.AssertedBy, n.Reach)
	}
	if !timeEq(n.UpdatedAt, Epoch.Add(time.Minute)) || !timeEq(n.CreatedAt, Epoch) || len(n.Paths) != 2 {
		e.t.Fatalf("times/paths: %+v", n)
	}
	// authority, reach and confidence never fall; weight caps at 10
	for range 50 {
		_, err := e.s.Upsert(e.ctx, memory.Node{Subkind: memory.Observation, ProjectID: "p", Label: "Tests are slow",
			Body: "on CI", Confidence: 0.1, Reach: memory.ReachHere, AssertedBy: memory.AssertedInferred})
		e.ok(err, "Upsert")
	}
	n = e.get(first.ID)
	if n.Weight != memory.MaxWeight || n.Confidence != 0.8 || n.AssertedBy != memory.AssertedUser || n.Reach != memory.ReachAnywhere {
		e.t.Fatalf("fell: %+v", n)
	}
	tl, err := e.s.Timeline(e.ctx, memory.TimelineQuery{Filter: memory.Filter{ProjectID: "p"}})
	e.ok(err, "Timeline")
	if len(tl) != 1 {
		e.t.Fatalf("duplicates: %d nodes", len(tl))
	}
}

func testUpsertUserText(e *env) {
	u := e.upsert(memory.Node{Subkind: memory.Preference, ProjectID: "p", Label: "Use Tabs", Source: memory.SourceUser})
	r, err := e.s.Upsert(e.ctx, memory.Node{Subkind: memory.Preference, ProjectID: "p", Label: "use tabs", Source: memory.SourceAgent})
	e.ok(err, "Upsert")
	if r.Created || e.get(u.ID).Label != "Use Tabs" || e.get(u.ID).Source != memory.SourceUser {
		e.t.Fatalf("model overwrote the user's text: %+v", e.get(u.ID))
	}
	a := e.upsert(memory.Node{Subkind: memory.Preference, ProjectID: "p", Label: "prefer short names"})
	_, err = e.s.Upsert(e.ctx, memory.Node{Subkind: memory.Preference, ProjectID: "p", Label: "Prefer Short Names", Source: memory.SourceUser})
	e.ok(err, "Upsert")
	if got := e.get(a.ID); got.Label != "Prefer Short Names" || got.Source != memory.SourceUser || got.AssertedBy != memory.AssertedUser {
		e.t.Fatalf("user's text did not replace the model's: %+v", got)
	}
}

func testUpsertPerProject(e *env) {
	a := e.upsert(node("p", memory.Decision, "same text"))
	b := e.upsert(node("q", memory.Decision, "same text"))
	g := e.upsert(memory.Node{Subkind: memory.Decision, Label: "same text"})
	if a.ID == b.ID || a.ID == g.ID || b.ID == g.ID {
		e.t.Fatalf("projects share a node: %s %s %s", a.ID, b.ID, g.ID)
	}
	g2 := e.upsert(memory.Node{Subkind: memory.Decision, Scope: memory.ScopeGlobal, Label: "SAME text"})
	if g2.ID != g.ID || g2.Weight != 1.25 {
		e.t.Fatalf("global not reinforced: %+v", g2)
	}
	// another subkind is another memory
	if c := e.upsert(node("p", memory.Pattern, "same text")); c.ID == a.ID {
		e.t.Fatal("subkind ignored by the digest")
	}
}

func testUpsertInvalid(e *env) {
	cases := []memory.Node{
		{Subkind: "bogus", ProjectID: "p", Label: "x"},
		{Subkind: memory.Decision, ProjectID: "p"},
		{Subkind: memory.Decision, Scope: memory.ScopeSession, ProjectID: "p", Label: "x"},
		{Subkind: memory.Decision, Scope: memory.ScopeGlobal, ProjectID: "p", Label: "x"},
		{Subkind: memory.Decision, ProjectID: "p", Label: "x", AssertedBy: "god"},
		{Subkind: memory.Decision, ProjectID: "p", Label: "x", Embedding: []float32{1, 2}},
	}
	for i, n := range cases {
		_, err := e.s.Upsert(e.ctx, n)
		e.is(err, memory.ErrInvalid, fmt.Sprintf("case %d", i))
	}
	live, err := e.s.HasLiveMemory(e.ctx, memory.ProjectRef{Project: "p"})
	e.ok(err, "HasLiveMemory")
	if live {
		e.t.Fatal("an invalid upsert stored something")
	}
}

func testUpsertArchived(e *env) {
	a := e.upsert(node("p", memory.Observation, "flaky test in ci"))
	e.ok(e.s.Archive(e.ctx, a.ID), "Archive")
	r, err := e.s.Upsert(e.ctx, node("p", memory.Observation, "flaky test in CI"))
	e.ok(err, "Upsert")
	if r.Created || r.Node.ID != a.ID || e.get(a.ID).ArchivedAt.IsZero() {
		e.t.Fatalf("a model's re-upsert must reinforce the forgotten node and keep it forgotten: %+v", r)
	}
	u := node("p", memory.Observation, "flaky test in ci")
	u.AssertedBy = memory.AssertedUser
	r, err = e.s.Upsert(e.ctx, u)
	e.ok(err, "Upsert")
	if r.Node.ID != a.ID || !e.get(a.ID).ArchivedAt.IsZero() {
		e.t.Fatalf("a user's re-assertion must restore: %+v", e.get(a.ID))
	}
}

func testHasPendingEmbeddings(e *env) {
	pending := func(project, model string) bool {
		e.t.Helper()
		ok, err := e.s.HasPendingEmbeddings(e.ctx, memory.ProjectRef{Project: project}, model)
		e.ok(err, "HasPendingEmbeddings")
		return ok
	}
	if pending("p1", "m1") || pending("", "m1") {
		e.t.Fatal("an empty store has pending embeddings")
	}
	a := e.upsert(node("p1", memory.Decision, "waits for a vector"))
	if !pending("p1", "m1") {
		e.t.Fatal("p1's node without a vector is not pending")
	}
	if pending("p2", "m1") {
		e.t.Fatal("p1's backlog is reported for p2")
	}
	e.ok(e.s.SetEmbedding(e.ctx, a.ID, "m1", vec(1, 0, 0)), "SetEmbedding")
	if pending("p1", "m1") {
		e.t.Fatal("an embedded node is still pending")
	}
	if !pending("p1", "m2") {
		e.t.Fatal("a node embedded by another model is not pending for m2")
	}
	g := memory.Node{Subkind: memory.Preference, Scope: memory.ScopeGlobal, Label: "a global rule"}
	gn := e.upsert(g)
	if !pending("p2", "m1") || !pending("p1", "m1") || !pending("", "m1") {
		e.t.Fatal("a global node without a vector must hold every project's recall")
	}
	e.ok(e.s.Archive(e.ctx, gn.ID), "Archive")
	if pending("p2", "m1") {
		e.t.Fatal("an archived node is still pending")
	}
}

func testGetMany(e *env) {
	_, err := e.s.Get(e.ctx, "nope")
	e.is(err, memory.ErrNotFound, "Get unknown")
	a := e.upsert(node("p", memory.Decision, "a"))
	b := e.upsert(node("p", memory.Decision, "b"))
	got, err := e.s.GetMany(e.ctx, []string{b.ID, "nope", a.ID})
	e.ok(err, "GetMany")
	e.sameList("GetMany", nodeIDs(got), []string{b.ID, a.ID})
	got, err = e.s.GetMany(e.ctx, nil)
	e.ok(err, "GetMany empty")
	if len(got) != 0 {
		e.t.Fatalf("GetMany(nil) = %d", len(got))
	}

	// The nodes are the caller's: changing or growing their slices changes
	// neither the store nor the other nodes returned.
	c := node("p", memory.Decision, "c")
	c.Paths = []string{"src/c.go", "src/c_test.go"}
	c.Entities = []memory.Entity{{Key: "c", Name: "C"}}
	d := node("p", memory.Decision, "d")
	d.Paths = []string{"src/d.go"}
	d.Entities = []memory.Entity{{Key: "d", Name: "D"}}
	c, d = e.upsert(c), e.upsert(d)
	got, err = e.s.GetMany(e.ctx, []string{c.ID, d.ID, c.ID})
	e.ok(err, "GetMany")
	e.sameList("GetMany with a repeated id", nodeIDs(got), []string{c.ID, d.ID})
	got[0].Paths[0] = "changed"
	got[0].Paths = append(got[0].Paths, "appended")
	got[0].Entities[0].Name = "changed"
	got[0].Entities = append(got[0].Entities, memory.Entity{Key: "x", Name: "appended"})
	if !slices.Equal(got[1].Paths, d.Paths) || !slices.Equal(got[1].Entities, d.Entities) {
		e.t.Fatalf("changing one node returned by GetMany changed another: %v %v", got[1].Paths, got[1].Entities)
	}
	again, err := e.s.GetMany(e.ctx, []string{c.ID, d.ID})
	e.ok(err, "GetMany")
	if !slices.Equal(again[0].Paths, c.Paths) || !slices.Equal(again[0].Entities, c.Entities) ||
		!slices.Equal(again[1].Paths, d.Paths) || !slices.Equal(again[1].Entities, d.Entities) {
		e.t.Fatalf("changing nodes returned by GetMany changed the store: %v %v / %v %v",
			again[0].Paths, again[0].Entities, again[1].Paths, again[1].Entities)
	}
}

// testHeadsAndTexts: a store that keeps text out of memory
// (memory.TextStore) gives by GetHeads and FillTexts the nodes GetMany
// gives, and fills a head read before a rewrite with the node as stored.
func testHeadsAndTexts(e *env) {
	ts, ok := e.s.(memory.TextStore)
	if !ok {
		e.t.Skip("the store keeps its texts in memory (no memory.TextStore)")
	}
	a := node("p", memory.Observation, "a label")
	a.Body = "a body\nof two lines"
	rule := node("p", memory.Preference, "a rule")
	rule.Body, rule.AssertedBy = "its reason", memory.AssertedUser
	a, rule = e.upsert(a), e.upsert(rule)
	want, err := e.s.GetMany(e.ctx, []string{a.ID, rule.ID})
	e.ok(err, "GetMany")
	heads, err := ts.GetHeads(e.ctx, []string{a.ID, "nope", rule.ID, a.ID})
	e.ok(err, "GetHeads")
	e.sameList("GetHeads", nodeIDs(heads), []string{a.ID, rule.ID})
	if heads[0].Label != "a label" {
		e.t.Fatalf("GetHeads label = %q", heads[0].Label)
	}
	e.ok(ts.FillTexts(e.ctx, heads), "FillTexts")
	for i := range want {
		if heads[i].Body != want[i].Body || heads[i].Body == "" {
			e.t.Fatalf("FillTexts body of %s = %q, GetMany's %q", want[i].ID, heads[i].Body, want[i].Body)
		}
	}
	old, err := ts.GetHeads(e.ctx, []string{a.ID})
	e.ok(err, "GetHeads")
	label, body := "another label", "another body"
	_, err = e.s.Update(e.ctx, a.ID, memory.Patch{Label: &label, Body: &body})
	e.ok(err, "Update")
	e.ok(ts.FillTexts(e.ctx, old), "FillTexts")
	if old[0].Label != label || old[0].Body != body {
		e.t.Fatalf("a head read before a rewrite filled as %q / %q, want the stored %q / %q", old[0].Label, old[0].Body, label, body)
	}
	// A head read before its memory was erased comes back with no ID
	// (memory.FillHitTexts then drops the hit): not its label without
	// a body.
	gone, err := ts.GetHeads(e.ctx, []string{a.ID, rule.ID})
	e.ok(err, "GetHeads")
	_, err = e.s.Erase(e.ctx, memory.EraseScope{Project: "p"}, nil)
	e.ok(err, "Erase")
	e.ok(ts.FillTexts(e.ctx, gone), "FillTexts")
	for _, n := range gone {
		if n.ID != "" {
			e.t.Fatalf("a head of an erased memory filled as %q / %q, want no ID", n.Label, n.Body)
		}
	}
}

func testUpdate(e *env) {
	a := e.upsert(node("p", memory.Decision, "old label"))
	e.ok(e.s.SetEmbedding(e.ctx, a.ID, "m1", vec(1, 0, 0)), "SetEmbedding")
	e.c.Advance(time.Minute)
	label, body := "new label", "and a body"
	n, err := e.s.Update(e.ctx, a.ID, memory.Patch{Label: &label, Body: &body})
	e.ok(err, "Update")
	if n.Label != label || n.Body != body || n.Digest != memory.Digest(memory.Decision, label, body, "") || !timeEq(n.UpdatedAt, e.c.Now()) {
		e.t.Fatalf("updated: %+v", n)
	}
	if g := e.get(a.ID); g.Digest != n.Digest || g.Label != label {
		e.t.Fatalf("not stored: %+v", g)
	}
	pending, err := e.s.PendingEmbeddings(e.ctx, "m1", 10)
	e.ok(err, "PendingEmbeddings")
	e.sameList("vector dropped", nodeIDs(pending), []string{a.ID})
	vs, err := e.s.Vector(e.ctx, "m1", vec(1, 0, 0), memory.Filter{ProjectID: "p"}, 10)
	e.ok(err, "Vector")
	if len(vs) != 0 {
		e.t.Fatalf("old vector still searched: %v", vs)
	}
	// the new digest is the identity now
	r, err := e.s.Upsert(e.ctx, memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "NEW label", Body: "and a body"})
	e.ok(err, "Upsert")
	if r.Created || r.Node.ID != a.ID {
		e.t.Fatal("digest index not updated")
	}
	old := e.upsert(node("p", memory.Decision, "old label"))
	if old.ID == a.ID {
		e.t.Fatal("old digest still points at the node")
	}
	// a digest another node holds is refused
	_, err = e.s.Update(e.ctx, old.ID, memory.Patch{Label: &label, Body: &body})
	e.is(err, memory.ErrRefused, "Update to a taken digest")
	// non-text patch keeps digest
	conf, pin := 0.9, true
	n, err = e.s.Update(e.ctx, a.ID, memory.Patch{Confidence: &conf, Pinned: &pin})
	e.ok(err, "Update")
	if n.Confidence != 0.9 || !n.Pinned || n.Digest != r.Node.Digest {
		e.t.Fatalf("non-text: %+v", n)
	}
	// a model cannot change the user's text
	u := e.upsert(memory.Node{Subkind: memory.Preference, ProjectID: "p", Label: "user said", Source: memory.SourceUser})
	other := "model says"
	_, err = e.s.Update(e.ctx, u.ID, memory.Patch{Label: &other})
	e.is(err, memory.ErrRefused, "model patch of user text")
	if e.get(u.ID).Label != "user said" {
		e.t.Fatal("refused patch was applied")
	}
	src := memory.SourceUser
	_, err = e.s.Update(e.ctx, u.ID, memory.Patch{Label: &other, Source: &src})
	e.ok(err, "user patch")
	// an agent's deliberate correction (a patch naming the agent) takes a
	// user's text over; the text is no longer what the user said: asserted
	// by the assistant, unpinned (memory.ApplyPatch)
	ua := e.upsert(memory.Node{Subkind: memory.Preference, ProjectID: "p", Label: "user rule", Source: memory.SourceUser, AssertedBy: memory.AssertedUser,
		Pinned: true})
	agent := memory.SourceAgent
	corrected := "agent's correction"
	_, err = e.s.Update(e.ctx, ua.ID, memory.Patch{Label: &corrected, Source: &agent})
	e.ok(err, "agent patch of user text")
	if got := e.get(ua.ID); got.Label != corrected || got.Source != memory.SourceAgent || got.AssertedBy != memory.AssertedAssistant || got.Pinned {
		e.t.Fatalf("agent patch of user text stored as %+v", got)
	}
	bad := memory.Subkind("bad")
	_, err = e.s.Update(e.ctx, a.ID, memory.Patch{Subkind: &bad})
	e.is(err, memory.ErrInvalid, "bad subkind")
	_, err = e.s.Update(e.ctx, "nope", memory.Patch{Label: &label})
	e.is(err, memory.ErrNotFound, "Update unknown")
}

func testArchiveRestore(e *env) {
	a := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "archive me zebra", Paths: []string{"x.go"}})
	e.ok(e.s.SetEmbedding(e.ctx, a.ID, "m", vec(1, 0)), "SetEmbedding")
	f := memory.Filter{ProjectID: "p"}
	e.c.Advance(time.Second)
	e.ok(e.s.Archive(e.ctx, a.ID), "Archive")
	if n := e.get(a.ID); !timeEq(n.ArchivedAt, e.c.Now()) {
		e.t.Fatalf("archived-at %v", n.ArchivedAt)
	}
	e.channelsSee(f, a.ID, false)
	fa := f
	fa.IncludeArchived = true
	e.channelsSee(fa, a.ID, true)
	e.ok(e.s.Restore(e.ctx, a.ID), "Restore")
	if !e.get(a.ID).ArchivedAt.IsZero() {
		e.t.Fatal("not restored")
	}
	e.channelsSee(f, a.ID, true)
	e.is(e.s.Archive(e.ctx, "nope"), memory.ErrNotFound, "Archive unknown")
	e.is(e.s.Restore(e.ctx, "nope"), memory.ErrNotFound, "Restore unknown")
}

// channelsSee checks that the lexical ("zebra"), vector (model m) and path
// ("x.go") channels and the timeline all do or do not return id under f.
func (e *env) channelsSee(f memory.Filter, id string, want bool) {
	e.t.Helper()
	lex, err := e.s.Lexical(e.ctx, []string{"zebra"}, f, 10)
	e.ok(err, "Lexical")
	vs, err := e.s.Vector(e.ctx, "m", vec(1, 0), f, 10)
	e.ok(err, "Vector")
	ps, err := e.s.ByPaths(e.ctx, []string{"x.go"}, f, 10)
	e.ok(err, "ByPaths")
	tl, err := e.s.Timeline(e.ctx, memory.TimelineQuery{Filter: f})
	e.ok(err, "Timeline")
	for what, got := range map[string][]string{"lexical": ids(lex), "vector": ids(vs), "paths": ids(ps), "timeline": nodeIDs(tl)} {
		has := false
		for _, g := range got {
			has = has || g == id
		}
		if has != want {
			e.t.Fatalf("%s with filter %+v: sees %s = %v, want %v", what, f, id, has, want)
		}
	}
}

func testSupersede(e *env) {
	userOld := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "use redis 7", AssertedBy: memory.AssertedUser})
	modelNew := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "use redis 8", AssertedBy: memory.AssertedAssistant})
	e.is(e.s.Supersede(e.ctx, userOld.ID, modelNew.ID), memory.ErrRefused, "lower authority")
	sessNew := e.upsert(memory.Node{Subkind: memory.Decision, Scope: memory.ScopeSession, ProjectID: "p", SessionID: "s",
		Label: "use redis 9", AssertedBy: memory.AssertedUser})
	e.is(e.s.Supersede(e.ctx, userOld.ID, sessNew.ID), memory.ErrRefused, "narrower scope")
	if n := e.get(userOld.ID); !n.Live() {
		e.t.Fatalf("refused supersede changed the node: %+v", n)
	}
	e.is(e.s.Supersede(e.ctx, userOld.ID, "nope"), memory.ErrNotFound, "unknown new")
	e.is(e.s.Supersede(e.ctx, userOld.ID, userOld.ID), memory.ErrInvalid, "self")
	good := e.upsert(memory.Node{Subkind: memory.Decision, Label: "use valkey", AssertedBy: memory.AssertedUser})
	e.c.Advance(time.Minute)
	e.ok(e.s.Supersede(e.ctx, userOld.ID, good.ID), "Supersede")
	old := e.get(userOld.ID)
	if old.SupersededBy != good.ID || !timeEq(old.ValidTo, e.c.Now()) || old.Live() {
		e.t.Fatalf("superseded: %+v", old)
	}
	edges, err := e.s.Edges(e.ctx, userOld.ID)
	e.ok(err, "Edges")
	if len(edges) != 1 || edges[0].Src != good.ID || edges[0].Dst != userOld.ID || edges[0].Relation != memory.Supersedes {
		e.t.Fatalf("supersedes edge: %+v", edges)
	}
	tl, err := e.s.Timeline(e.ctx, memory.TimelineQuery{Filter: memory.Filter{ProjectID: "p"}, Limit: 10})
	e.ok(err, "Timeline")
	for _, n := range tl {
		if n.ID == userOld.ID {
			e.t.Fatal("superseded node in the default timeline")
		}
	}
	tl, err = e.s.Timeline(e.ctx, memory.TimelineQuery{Filter: memory.Filter{ProjectID: "p", IncludeSuperseded: true}, Limit: 10})
	e.ok(err, "Timeline")
	if !contains(nodeIDs(tl), userOld.ID) {
		e.t.Fatal("superseded node missing when asked for")
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func testRevise(e *env) {
	old := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", SessionID: "s1", Label: "deploy on fridays",
		AssertedBy: memory.AssertedAssistant, Paths: []string{"deploy.sh"}})
	t1 := e.c.Now()
	e.c.Advance(time.Hour)
	t2 := e.c.Now()
	n, err := e.s.Revise(e.ctx, old.ID, memory.Node{Label: "never deploy on fridays", AssertedBy: memory.AssertedUser})
	e.ok(err, "Revise")
	if n.ID == old.ID || n.ProjectID != "p" || n.Subkind != memory.Decision || len(n.Paths) != 1 || !n.Live() {
		e.t.Fatalf("new fact: %+v", n)
	}
	o := e.get(old.ID)
	if !timeEq(o.ValidTo, t2) || o.SupersededBy != n.ID {
		e.t.Fatalf("old not closed: %+v", o)
	}
	edges, err := e.s.Edges(e.ctx, n.ID)
	e.ok(err, "Edges")
	if len(edges) != 1 || edges[0].Src != n.ID || edges[0].Dst != old.ID || edges[0].Relation != memory.Supersedes {
		e.t.Fatalf("link: %+v", edges)
	}
	f := memory.Filter{ProjectID: "p"}
	now, err := e.s.Timeline(e.ctx, memory.TimelineQuery{Filter: f})
	e.ok(err, "Timeline")
	e.sameList("timeline now", nodeIDs(now), []string{n.ID})
	then, err := e.s.Timeline(e.ctx, memory.TimelineQuery{Filter: f, AsOf: t1.Add(30 * time.Minute)})
	e.ok(err, "Timeline as of")
	e.sameList("as of the past", nodeIDs(then), []string{old.ID})
	later, err := e.s.Timeline(e.ctx, memory.TimelineQuery{Filter: f, AsOf: t2.Add(time.Minute)})
	e.ok(err, "Timeline as of")
	e.sameList("as of after revise", nodeIDs(later), []string{n.ID})
	before, err := e.s.Timeline(e.ctx, memory.TimelineQuery{Filter: f, AsOf: t1.Add(-time.Minute)})
	e.ok(err, "Timeline as of")
	e.sameList("as of before anything", nodeIDs(before), nil)

	// refusals and errors change nothing
	_, err = e.s.Revise(e.ctx, n.ID, memory.Node{Label: "deploy whenever", AssertedBy: memory.AssertedInferred})
	e.is(err, memory.ErrRefused, "lower authority revise")
	_, err = e.s.Revise(e.ctx, n.ID, memory.Node{Label: "Never deploy on Fridays", AssertedBy: memory.AssertedUser})
	e.is(err, memory.ErrInvalid, "revise to the same text")
	_, err = e.s.Revise(e.ctx, n.ID, memory.Node{Subkind: "bad", Label: "x", AssertedBy: memory.AssertedUser})
	e.is(err, memory.ErrInvalid, "invalid revise")
	_, err = e.s.Revise(e.ctx, "nope", memory.Node{Label: "x"})
	e.is(err, memory.ErrNotFound, "revise unknown")
	if cur := e.get(n.ID); !cur.Live() {
		e.t.Fatal("a failed revise closed the node")
	}
	// revising to an existing memory reinforces it
	ex := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "deploy on tuesdays", AssertedBy: memory.AssertedUser})
	r, err := e.s.Revise(e.ctx, n.ID, memory.Node{Label: "deploy on TUESDAYS", AssertedBy: memory.AssertedUser})
	e.ok(err, "revise to existing")
	if r.ID != ex.ID || r.Weight != 1.25 || e.get(n.ID).SupersededBy != ex.ID {
		e.t.Fatalf("revise to existing: %+v", r)
	}
}

func testTimeline(e *env) {
	a := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", SessionID: "s1", Label: "first"})
	e.c.Advance(time.Minute)
	b := e.upsert(memory.Node{Subkind: memory.Pattern, ProjectID: "p", SessionID: "s2", Label: "second"})
	e.c.Advance(time.Minute)
	c := e.upsert(memory.Node{Subkind: memory.Observation, Scope: memory.ScopeSession, ProjectID: "p", SessionID: "s1", Label: "third"})
	e.c.Advance(time.Minute)
	d := e.upsert(memory.Node{Subkind: memory.Failure, Scope: memory.ScopeSession, ProjectID: "p", SessionID: "s2", Label: "fourth"})
	e.c.Advance(time.Minute)
	g := e.upsert(memory.Node{Subkind: memory.Preference, Label: "global fifth"})
	e.upsert(node("q", memory.Decision, "other project"))
	e.c.Advance(time.Minute)
	e.upsert(node("p", memory.Decision, "first")) // reinforcing moves a to the top
	tl := func(q memory.TimelineQuery) []string {
		e.t.Helper()
		ns, err := e.s.Timeline(e.ctx, q)
		e.ok(err, "Timeline")
		return nodeIDs(ns)
	}
	e.sameList("session s1", tl(memory.TimelineQuery{Filter: memory.Filter{ProjectID: "p", SessionID: "s1"}}), []string{a.ID, g.ID, c.ID, b.ID})
	e.sameList("session s2", tl(memory.TimelineQuery{Filter: memory.Filter{ProjectID: "p", SessionID: "s2"}}), []string{a.ID, g.ID, d.ID, b.ID})
	e.sameList("only s1", tl(memory.TimelineQuery{Filter: memory.Filter{ProjectID: "p", SessionID: "s1"}, OnlySession: true}), []string{a.ID, c.ID})
	e.sameList("limit", tl(memory.TimelineQuery{Filter: memory.Filter{ProjectID: "p", SessionID: "s1"}, Limit: 2}), []string{a.ID, g.ID})
	e.sameList("subkinds", tl(memory.TimelineQuery{Filter: memory.Filter{ProjectID: "p", Subkinds: []memory.Subkind{memory.Pattern, memory.Preference}}}), []string{g.ID, b.ID})
}

func testStanding(e *env) {
	user := func(k memory.Subkind, label string) memory.Node {
		n := node("p", k, label)
		n.AssertedBy, n.Source = memory.AssertedUser, memory.SourceUser
		return n
	}
	pat := e.upsert(user(memory.Pattern, "run make lint before commit"))
	e.c.Advance(time.Minute)
	dec1 := e.upsert(user(memory.Decision, "we use sqlite"))
	e.c.Advance(time.Minute)
	pref := e.upsert(user(memory.Preference, "answer in english"))
	e.c.Advance(time.Minute)
	dec2 := e.upsert(user(memory.Decision, "we use nats"))
	e.c.Advance(time.Minute)
	pin := node("p", memory.Pattern, "pinned inferred rule")
	pin.Pinned = true
	pinned := e.upsert(pin)
	glob := user(memory.Preference, "never use tool X")
	glob.Scope, glob.ProjectID = memory.ScopeGlobal, ""
	global := e.upsert(glob)
	// not standing
	e.upsert(node("p", memory.Decision, "inferred decision"))
	e.upsert(user(memory.Observation, "user observation"))
	low := user(memory.Preference, "low confidence")
	low.Confidence = 0.29
	e.upsert(low)
	sess := user(memory.Preference, "session preference")
	sess.Scope, sess.SessionID = memory.ScopeSession, "s"
	e.upsert(sess)
	op := user(memory.Preference, "other project")
	op.ProjectID = "q"
	e.upsert(op)
	arch := e.upsert(user(memory.Preference, "archived preference"))
	e.ok(e.s.Archive(e.ctx, arch.ID), "Archive")

	got, err := e.s.StandingInstructions(e.ctx, memory.ProjectRef{Project: "p"}, 0)
	e.ok(err, "StandingInstructions")
	byName := map[string]string{"pat": pat.ID, "dec1": dec1.ID, "pref": pref.ID, "dec2": dec2.ID, "pinned": pinned.ID, "global": global.ID}
	want := []string{pinned.ID, global.ID, pref.ID, dec2.ID, dec1.ID, pat.ID}
	if !equal(nodeIDs(got), want) {
		e.t.Fatalf("standing: got %s, want %s", names(byName, nodeIDs(got)), names(byName, want))
	}
	got, err = e.s.StandingInstructions(e.ctx, memory.ProjectRef{Project: "p"}, 3)
	e.ok(err, "StandingInstructions")
	e.sameList("limit 3", nodeIDs(got), want[:3])
	got, err = e.s.StandingInstructions(e.ctx, memory.ProjectRef{Project: "empty"}, 6)
	e.ok(err, "StandingInstructions")
	e.sameList("other project sees global only", nodeIDs(got), []string{global.ID})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func testFeedback(e *env) {
	a := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "a", Confidence: 0.98, Weight: 9.8})
	b := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "b", Confidence: 0.5})
	c := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "c", Confidence: 0.15})
	d := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "d", Confidence: 0.5})
	e.c.Advance(time.Hour)
	e.ok(e.s.ApplyFeedback(e.ctx, map[string]memory.Verdict{a.ID: memory.VerdictUsed, b.ID: memory.VerdictUsed,
		c.ID: memory.VerdictWrong, d.ID: memory.VerdictIgnored, "unknown": memory.VerdictUsed}), "ApplyFeedback")
	if n := e.get(a.ID); n.Useful != 1 || n.Weight != 10 || n.Confidence != 1 {
		e.t.Fatalf("used at cap: %+v", n)
	}
	if n := e.get(b.ID); n.Useful != 1 || n.Weight != 1.5 || !near(n.Confidence, 0.55, 1e-9) || n.Unhelpful != 0 {
		e.t.Fatalf("used: %+v", n)
	}
	if n := e.get(c.ID); n.Unhelpful != 1 || n.Confidence != memory.MinConfidence || n.Useful != 0 {
		e.t.Fatalf("wrong: %+v", n)
	}
	if n := e.get(d.ID); n.Unhelpful != 1 || n.Confidence != 0.5 || n.Weight != 1 {
		e.t.Fatalf("ignored: %+v", n)
	}
	err := e.s.ApplyFeedback(e.ctx, map[string]memory.Verdict{b.ID: memory.VerdictUsed, d.ID: "meh"})
	e.is(err, memory.ErrInvalid, "unknown verdict")
	if n := e.get(b.ID); n.Useful != 1 {
		e.t.Fatalf("an invalid feedback call applied part of it: %+v", n)
	}
	e.ok(e.s.ApplyFeedback(e.ctx, map[string]memory.Verdict{d.ID: memory.VerdictWrong}), "ApplyFeedback")
	if n := e.get(d.ID); n.Unhelpful != 2 || !near(n.Confidence, 0.3, 1e-9) {
		e.t.Fatalf("wrong after ignored: %+v", n)
	}
}

func testMarkStale(e *env) {
	mk := func(k memory.Subkind, label string, mut func(*memory.Node)) memory.Node {
		n := memory.Node{Subkind: k, ProjectID: "p", Label: label, Confidence: 1, Paths: []string{"src/a.go", "src/b.go"}}
		if mut != nil {
			mut(&n)
		}
		return e.upsert(n)
	}
	obs := mk(memory.Observation, "obs", nil)
	fail := mk(memory.Failure, "fail", nil)
	pat := mk(memory.Pattern, "pat", nil)
	dec := mk(memory.Decision, "dec", nil)
	pin := mk(memory.Observation, "pinned", func(n *memory.Node) { n.Pinned = true })
	usr := mk(memory.Observation, "user", func(n *memory.Node) { n.Source = memory.SourceUser })
	other := mk(memory.Observation, "elsewhere", func(n *memory.Node) { n.Paths = []string{"src/c.go"} })
	foreign := mk(memory.Observation, "foreign", func(n *memory.Node) { n.ProjectID = "q" })
	arch := mk(memory.Observation, "archived", nil)
	e.ok(e.s.Archive(e.ctx, arch.ID), "Archive")
	updated := e.get(obs.ID).UpdatedAt

	e.c.Advance(time.Minute)
	marked, err := e.s.MarkStale(e.ctx, memory.ProjectRef{Project: "p"}, []string{"src/b.go", "README.md"})
	e.ok(err, "MarkStale")
	e.sameSet("marked", marked, []string{obs.ID, fail.ID, pat.ID, dec.ID})
	for id, want := range map[string]float64{obs.ID: 0.82, fail.ID: 0.92, pat.ID: 0.97, dec.ID: 1, pin.ID: 1, usr.ID: 1, other.ID: 1, foreign.ID: 1} {
		n := e.get(id)
		if !near(n.Confidence, want, 1e-9) {
			e.t.Errorf("%s: confidence %v, want %v", n.Label, n.Confidence, want)
		}
		if stale := contains(marked, id); stale != n.Stale() || (stale && !timeEq(n.StaleAt, e.c.Now())) {
			e.t.Errorf("%s: stale-at %v", n.Label, n.StaleAt)
		}
	}
	if !timeEq(e.get(obs.ID).UpdatedAt, updated) {
		e.t.Error("marking stale moved updated-at")
	}
	e.c.Advance(5 * time.Hour)
	marked, err = e.s.MarkStale(e.ctx, memory.ProjectRef{Project: "p"}, []string{"src/a.go"})
	e.ok(err, "MarkStale")
	e.sameSet("within 6 hours", marked, nil)
	e.c.Advance(time.Hour)
	marked, err = e.s.MarkStale(e.ctx, memory.ProjectRef{Project: "p"}, []string{"src/a.go"})
	e.ok(err, "MarkStale")
	e.sameSet("after 6 hours", marked, []string{obs.ID, fail.ID, pat.ID, dec.ID})
	if n := e.get(obs.ID); !near(n.Confidence, 0.82*0.82, 1e-9) {
		e.t.Fatalf("second decay: %v", n.Confidence)
	}
	// the floor
	low := e.upsert(memory.Node{Subkind: memory.Observation, ProjectID: "p", Label: "low", Confidence: 0.06, Paths: []string{"z.go"}})
	_, err = e.s.MarkStale(e.ctx, memory.ProjectRef{Project: "p"}, []string{"z.go"})
	e.ok(err, "MarkStale")
	if n := e.get(low.ID); n.Confidence != memory.MinConfidence {
		e.t.Fatalf("floor: %v", n.Confidence)
	}
	// re-upserting clears the mark
	e.upsert(memory.Node{Subkind: memory.Observation, ProjectID: "p", Label: "low"})
	if cur := e.get(low.ID); cur.Stale() {
		e.t.Fatal("reinforcement kept the stale mark")
	}
}

func testMarkStaleCap(e *env) {
	var all []string
	for i := range memory.MaxStalePerCall + 10 {
		n := e.upsert(memory.Node{Subkind: memory.Observation, ProjectID: "p", Label: fmt.Sprintf("node %d", i), Paths: []string{"hot.go"}})
		all = append(all, n.ID)
		e.c.Advance(time.Second)
	}
	marked, err := e.s.MarkStale(e.ctx, memory.ProjectRef{Project: "p"}, []string{"hot.go"})
	e.ok(err, "MarkStale")
	e.sameSet("most recently updated 60", marked, all[10:])
	marked, err = e.s.MarkStale(e.ctx, memory.ProjectRef{Project: "p"}, []string{"hot.go"})
	e.ok(err, "MarkStale")
	e.sameSet("the rest", marked, all[:10])
}

func testTouch(e *env) {
	a := e.upsert(node("p", memory.Decision, "a"))
	e.c.Advance(time.Hour)
	e.ok(e.s.Touch(e.ctx, []string{a.ID, "unknown"}), "Touch")
	e.ok(e.s.Touch(e.ctx, []string{a.ID}), "Touch")
	n := e.get(a.ID)
	if n.Access != 2 || !timeEq(n.AccessedAt, e.c.Now()) || !timeEq(n.UpdatedAt, Epoch) {
		e.t.Fatalf("touched: access %d accessed %v updated %v", n.Access, n.AccessedAt, n.UpdatedAt)
	}
}

func testPending(e *env) {
	a := e.upsert(node("p", memory.Decision, "a"))
	e.c.Advance(time.Second)
	b := e.upsert(node("p", memory.Decision, "b"))
	e.c.Advance(time.Second)
	c := e.upsert(memory.Node{Subkind: memory.Decision, Label: "global c"})
	e.c.Advance(time.Second)
	arch := e.upsert(node("q", memory.Decision, "archived"))
	e.ok(e.s.Archive(e.ctx, arch.ID), "Archive")
	pend := func(model string, limit int) []string {
		e.t.Helper()
		ns, err := e.s.PendingEmbeddings(e.ctx, model, limit)
		e.ok(err, "PendingEmbeddings")
		return nodeIDs(ns)
	}
	e.sameList("all pending, oldest first", pend("m1", 10), []string{a.ID, b.ID, c.ID})
	e.sameList("limit", pend("m1", 2), []string{a.ID, b.ID})
	e.ok(e.s.SetEmbedding(e.ctx, a.ID, "m1", vec(1, 0, 0)), "SetEmbedding")
	e.ok(e.s.SetEmbedding(e.ctx, c.ID, "m1", vec(0, 1, 0)), "SetEmbedding")
	e.sameList("after embedding", pend("m1", 10), []string{b.ID})
	e.sameList("another model", pend("m2", 10), []string{a.ID, b.ID, c.ID})
	e.ok(e.s.SetEmbedding(e.ctx, a.ID, "m2", vec(0, 0, 1)), "SetEmbedding")
	e.sameList("model changed", pend("m1", 10), []string{a.ID, b.ID})
	e.is(e.s.SetEmbedding(e.ctx, "nope", "m1", vec(1, 0, 0)), memory.ErrNotFound, "unknown node")
	e.is(e.s.SetEmbedding(e.ctx, b.ID, "m1", vec(1, 0)), memory.ErrInvalid, "wrong dimension")
	e.is(e.s.SetEmbedding(e.ctx, b.ID, "", vec(1)), memory.ErrInvalid, "no model")
	e.is(e.s.SetEmbedding(e.ctx, b.ID, "m1", nil), memory.ErrInvalid, "no vector")
	// the vector is searchable under its model only
	vs, err := e.s.Vector(e.ctx, "m2", vec(0, 0, 1), memory.Filter{ProjectID: "p"}, 10)
	e.ok(err, "Vector")
	e.sameList("m2 vectors", ids(vs), []string{a.ID})
	vs, err = e.s.Vector(e.ctx, "m1", vec(0, 1, 0), memory.Filter{ProjectID: "p"}, 10)
	e.ok(err, "Vector")
	e.sameList("m1 vectors", ids(vs), []string{c.ID})
}

func testHasLive(e *env) {
	has := func(p string) bool {
		e.t.Helper()
		ok, err := e.s.HasLiveMemory(e.ctx, memory.ProjectRef{Project: p})
		e.ok(err, "HasLiveMemory")
		return ok
	}
	if has("p") {
		e.t.Fatal("empty store has live memory")
	}
	a := e.upsert(node("p", memory.Decision, "a"))
	if !has("p") || has("q") {
		e.t.Fatal("project memory")
	}
	e.ok(e.s.Archive(e.ctx, a.ID), "Archive")
	if has("p") {
		e.t.Fatal("archived memory counted")
	}
	e.upsert(memory.Node{Subkind: memory.Preference, Label: "global"})
	if !has("q") {
		e.t.Fatal("global memory not counted")
	}
}

func testPutBatch(e *env) {
	t0 := Epoch.Add(-48 * time.Hour)
	nodes := []memory.Node{
		{ID: "n1", Subkind: memory.Decision, ProjectID: "p", Label: "imported one", UpdatedAt: t0, CreatedAt: t0,
			Embedding: vec(1, 0), EmbeddingModel: "m", Paths: []string{"a.go"}},
		{ID: "n2", Subkind: memory.Pattern, ProjectID: "p", Label: "imported two", Confidence: 0.8, AssertedBy: memory.AssertedUser},
		{ID: "n3", Subkind: memory.Preference, Label: "imported global", Pinned: true},
		{ID: "n4", Subkind: memory.Observation, ProjectID: "p", Label: "closed one", ValidFrom: t0, ValidTo: t0.Add(time.Hour), SupersededBy: "n1"},
	}
	edges := []memory.Edge{{Src: "n1", Dst: "n2", Relation: memory.RelatesTo, Weight: 3}, {Src: "n1", Dst: "n4", Relation: memory.Supersedes}}
	e.ok(e.s.PutBatch(e.ctx, nodes, edges), "PutBatch")
	e.ok(e.s.PutBatch(e.ctx, nodes, edges), "PutBatch again") // idempotent by id
	n1 := e.get("n1")
	if !timeEq(n1.UpdatedAt, t0) || n1.Label != "imported one" || n1.Weight != 1 {
		e.t.Fatalf("n1: %+v", n1)
	}
	if n := e.get("n2"); n.Confidence != 0.8 || n.AssertedBy != memory.AssertedUser {
		e.t.Fatalf("n2: %+v", n)
	}
	if n := e.get("n4"); n.Live() || n.SupersededBy != "n1" {
		e.t.Fatalf("n4: %+v", n)
	}
	vs, err := e.s.Vector(e.ctx, "m", vec(1, 0), memory.Filter{ProjectID: "p"}, 5)
	e.ok(err, "Vector")
	e.sameList("batch vectors searchable", ids(vs), []string{"n1"})
	lex, err := e.s.Lexical(e.ctx, []string{"imported"}, memory.Filter{ProjectID: "p"}, 5)
	e.ok(err, "Lexical")
	e.sameSet("batch text searchable", ids(lex), []string{"n1", "n2", "n3"})
	r, err := e.s.Upsert(e.ctx, node("p", memory.Pattern, "IMPORTED two"))
	e.ok(err, "Upsert")
	if r.Node.ID != "n2" {
		e.t.Fatal("batch nodes not in the digest index")
	}

	var gotNodes, gotEdges []string
	var vecOK bool
	e.ok(e.s.Scan(e.ctx, func(n memory.Node) error {
		gotNodes = append(gotNodes, n.ID)
		if n.ID == "n1" {
			vecOK = len(n.Embedding) == 2 && n.Embedding[0] == 1 && n.EmbeddingModel == "m"
		}
		return nil
	}, func(ed memory.Edge) error {
		gotEdges = append(gotEdges, ed.Src+">"+ed.Dst+":"+string(ed.Relation))
		if ed.Src == "n1" && ed.Dst == "n2" && ed.Weight != 3 {
			e.t.Errorf("edge weight %v", ed.Weight)
		}
		return nil
	}), "Scan")
	e.sameSet("scanned nodes", gotNodes, []string{"n1", "n2", "n3", "n4"})
	e.sameSet("scanned edges", gotEdges, []string{"n1>n2:relates_to", "n1>n4:supersedes"})
	if !vecOK {
		e.t.Fatal("Scan did not return the vector")
	}
	stop := errors.New("stop")
	err = e.s.Scan(e.ctx, func(memory.Node) error { return stop }, func(memory.Edge) error { return nil })
	if !errors.Is(err, stop) {
		e.t.Fatalf("Scan callback error not returned: %v", err)
	}
}

// testPutBatchSameIDTwice: a batch that gives one id twice is invalid and
// writes nothing (which copy would be meant is the caller's to say).
func testPutBatchSameIDTwice(e *env) {
	nodes := []memory.Node{
		{ID: "a", Subkind: memory.Decision, ProjectID: "p", Label: "alpha beta"},
		{ID: "b", Subkind: memory.Decision, ProjectID: "p", Label: "beta gamma"},
		{ID: "a", Subkind: memory.Decision, ProjectID: "p", Label: "gamma delta"},
	}
	e.is(e.s.PutBatch(e.ctx, nodes, nil), memory.ErrInvalid, "PutBatch with an id twice")
	f := memory.Filter{ProjectID: "p"}
	for _, w := range []string{"alpha", "beta", "delta"} {
		e.sameSet("after the refused batch, "+w, ids(e.lexical([]string{w}, f, 5)), nil)
	}
}

func testPutBatchInvalid(e *env) {
	good := []memory.Node{{ID: "a", Subkind: memory.Decision, ProjectID: "p", Label: "a"}, {ID: "b", Subkind: memory.Decision, ProjectID: "p", Label: "b"}}
	bads := []struct {
		name  string
		nodes []memory.Node
		edges []memory.Edge
	}{
		{"bad subkind", append(slicesClone(good), memory.Node{ID: "c", Subkind: "x", ProjectID: "p", Label: "c"}), nil},
		{"empty text", append(slicesClone(good), memory.Node{ID: "c", Subkind: memory.Decision, ProjectID: "p"}), nil},
		{"self-link", good, []memory.Edge{{Src: "a", Dst: "a", Relation: memory.RelatesTo}}},
		{"bad relation", good, []memory.Edge{{Src: "a", Dst: "b", Relation: "loves"}}},
		{"dangling edge", good, []memory.Edge{{Src: "a", Dst: "nowhere", Relation: memory.RelatesTo}}},
	}
	for _, b := range bads {
		err := e.s.PutBatch(e.ctx, b.nodes, b.edges)
		e.is(err, memory.ErrInvalid, b.name)
	}
	var n int
	e.ok(e.s.Scan(e.ctx, func(memory.Node) error { n++; return nil }, func(memory.Edge) error { n++; return nil }), "Scan")
	if n != 0 {
		e.t.Fatalf("a rejected batch stored %d items", n)
	}
	// digest already held by another node
	e.upsert(node("p", memory.Decision, "taken"))
	err := e.s.PutBatch(e.ctx, []memory.Node{{ID: "z", Subkind: memory.Decision, ProjectID: "p", Label: "taken"}, good[0]}, nil)
	e.is(err, memory.ErrRefused, "a batch node with a digest another node holds")
	if _, err := e.s.Get(e.ctx, "a"); !errors.Is(err, memory.ErrNotFound) {
		e.t.Fatalf("rejected batch half-applied: %v", err)
	}
}

func slicesClone(ns []memory.Node) []memory.Node { return append([]memory.Node(nil), ns...) }

func testRedaction(e *env) {
	secret := "AKIAIOSFODNN7EXAMPLE"
	a := e.upsert(memory.Node{Subkind: memory.Failure, ProjectID: "p", Label: "deploy failed with key " + secret,
		Body: "the config had password=hunter2 and Authorization: Bearer abcdefghijklmnop"})
	n := e.get(a.ID)
	for _, s := range []string{secret, "hunter2", "abcdefghijklmnop"} {
		if strings.Contains(n.Label+n.Body, s) {
			e.t.Fatalf("secret %q stored: %q %q", s, n.Label, n.Body)
		}
	}
	if !strings.Contains(n.Body, "password=[redacted]") {
		e.t.Fatalf("assignment name lost: %q", n.Body)
	}
	body := "token: ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"
	u, err := e.s.Update(e.ctx, a.ID, memory.Patch{Body: &body})
	e.ok(err, "Update")
	if strings.Contains(e.get(u.ID).Body, "ghp_") {
		e.t.Fatalf("Update stored a secret: %q", e.get(u.ID).Body)
	}
	r, err := e.s.Revise(e.ctx, a.ID, memory.Node{Label: "db url postgres://app:s3cret@db/app"})
	e.ok(err, "Revise")
	if strings.Contains(e.get(r.ID).Label, "s3cret") {
		e.t.Fatalf("Revise stored a secret: %q", e.get(r.ID).Label)
	}
	e.ok(e.s.PutBatch(e.ctx, []memory.Node{{ID: "imp", Subkind: memory.Decision, ProjectID: "p", Label: "api_key=abc123"}}, nil), "PutBatch")
	if got := e.get("imp").Label; got != "api_key=[redacted]" {
		e.t.Fatalf("PutBatch stored %q", got)
	}
	lex, err := e.s.Lexical(e.ctx, []string{"hunter2"}, memory.Filter{ProjectID: "p"}, 5)
	e.ok(err, "Lexical")
	if len(lex) != 0 {
		e.t.Fatal("the secret is still in the lexical index")
	}
	s := memory.SessionRef{Project: "p", Session: "s"}
	msgs, _, err := e.s.AppendTranscript(e.ctx, s, "t1", []memory.Message{{Role: memory.RoleUser, Content: "my key is " + secret}})
	e.ok(err, "AppendTranscript")
	stored, err := e.s.Messages(e.ctx, s, 0, 0)
	e.ok(err, "Messages")
	if strings.Contains(msgs[0].Content, secret) || len(stored) != 1 || strings.Contains(stored[0].Content, secret) {
		e.t.Fatalf("transcript stored a secret: %+v", stored)
	}
	e.ok(e.s.SaveSummary(e.ctx, s, memory.Summary{Content: "user shared " + secret, UpTo: 1}), "SaveSummary")
	sum, err := e.s.LatestSummary(e.ctx, s)
	e.ok(err, "LatestSummary")
	if strings.Contains(sum.Content, secret) {
		e.t.Fatalf("summary stored a secret: %q", sum.Content)
	}
}

// DigestOwners finds, per project, the node that holds a text, with its
// vector, and nothing for a digest no node of the project holds.
func testDigestOwners(e *env) {
	a := e.upsert(memory.Node{Subkind: memory.Observation, ProjectID: "p1", Label: "Thanks!"})
	b := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p1", Label: "Ship on Fridays"})
	other := e.upsert(memory.Node{Subkind: memory.Observation, ProjectID: "p2", Label: "Thanks!"})
	e.ok(e.s.SetEmbedding(e.ctx, a.ID, "m", []float32{1, 0, 0}), "set embedding")
	got, err := e.s.DigestOwners(e.ctx, memory.ProjectRef{Project: "p1"}, []string{a.Digest, b.Digest, "no-such-digest"})
	e.ok(err, "digest owners")
	if len(got) != 2 || got[a.Digest].ID != a.ID || got[b.Digest].ID != b.ID {
		e.t.Fatalf("DigestOwners(p1) = %v, want %s and %s", got, a.ID, b.ID)
	}
	if n := got[a.Digest]; n.EmbeddingModel != "m" || len(n.Embedding) != 3 {
		e.t.Errorf("DigestOwners left the vector out: model %q, %d dims", n.EmbeddingModel, len(n.Embedding))
	}
	got, err = e.s.DigestOwners(e.ctx, memory.ProjectRef{Project: "p2"}, []string{a.Digest, b.Digest})
	e.ok(err, "digest owners p2")
	if len(got) != 1 || got[a.Digest].ID != other.ID {
		e.t.Errorf("DigestOwners(p2) = %v, want only %s", got, other.ID)
	}
	got, err = e.s.DigestOwners(e.ctx, memory.ProjectRef{Project: "p1"}, nil)
	e.ok(err, "digest owners of nothing")
	if len(got) != 0 {
		e.t.Errorf("DigestOwners(nil) = %v", got)
	}
}
