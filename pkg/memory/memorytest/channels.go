package memorytest

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

var channelTests = []subtest{
	{"Lexical/Ranking", testLexicalRanking},
	{"Lexical/Fields", testLexicalFields},
	{"Lexical/LabelWeight", testLexicalLabelWeight},
	{"Lexical/StemFamily", testLexicalStemFamily},
	{"Lexical/StopWords", testLexicalStopWords},
	{"Lexical/CommonWords", testLexicalCommonWords},
	{"Conversations/Adjacent", testAdjacent},
	{"Vector/Ranking", testVectorRanking},
	{"Vector/Scores", testVectorScores},
	{"ByPaths/Ranking", testByPaths},
	{"Filter", testFilterMatrix},
}

// lexicalCorpus is a fixed corpus of equally long labels in project p, plus
// unrelated documents so that every term of the queries is rare.
var lexicalCorpus = map[string]string{
	"both":    "redis cluster failover notes",
	"redis":   "redis memory tuning notes",
	"cluster": "cluster sizing tuning notes",
	"zebra":   "zebra alpha beta gamma",
	"apple1":  "apple delta epsilon eta",
	"apple2":  "apple theta iota kappa",
	"apple3":  "apple lambda mu nu",
	"apple4":  "apple xi omicron pi",
	"f1":      "rho sigma tau upsilon",
	"f2":      "phi chi psi omega",
	"f3":      "one two three four",
	"f4":      "five six seven eight",
	"f5":      "nine ten eleven twelve",
	"f6":      "red green blue yellow",
	"f7":      "north south east west",
	"f8":      "spring summer autumn winter",
}

func (e *env) seedLexical() map[string]string {
	byName := map[string]string{}
	for name, label := range lexicalCorpus {
		byName[name] = e.upsert(node("p", memory.Observation, label)).ID
	}
	return byName
}

func (e *env) lexical(terms []string, f memory.Filter, limit int) []memory.Scored {
	e.t.Helper()
	sc, err := e.s.Lexical(e.ctx, terms, f, limit)
	e.ok(err, "Lexical")
	e.ranked(fmt.Sprintf("lexical %v", terms), sc)
	return sc
}

func testLexicalRanking(e *env) {
	byName := e.seedLexical()
	f := memory.Filter{ProjectID: "p"}
	got := ids(e.lexical([]string{"redis", "cluster"}, f, 10))
	if len(got) != 3 || got[0] != byName["both"] {
		e.t.Fatalf("more matching terms must rank first: %s", names(byName, got))
	}
	e.sameSet("redis or cluster", got, []string{byName["both"], byName["redis"], byName["cluster"]})

	got = ids(e.lexical([]string{"apple", "zebra"}, f, 10))
	if len(got) != 5 || got[0] != byName["zebra"] {
		e.t.Fatalf("the rarer term must rank first: %s", names(byName, got))
	}
	e.sameSet("apple or zebra", got[1:], []string{byName["apple1"], byName["apple2"], byName["apple3"], byName["apple4"]})

	got = ids(e.lexical([]string{"notes"}, f, 2))
	if len(got) != 2 {
		e.t.Fatalf("limit 2: %s", names(byName, got))
	}
	if got := e.lexical(nil, f, 10); len(got) != 0 {
		e.t.Fatalf("no terms: %v", got)
	}
	if got := e.lexical([]string{"nothingmatchesthis"}, f, 10); len(got) != 0 {
		e.t.Fatalf("no match: %v", got)
	}
	// upper-case in the text is matched by the lower-case terms of memory.Terms
	up := e.upsert(node("p", memory.Decision, "Use PostgreSQL Replication"))
	e.sameList("case", ids(e.lexical(memory.Terms("postgresql"), f, 10)), []string{up.ID})
	// an updated text is re-indexed
	label := "switch to valkey"
	_, err := e.s.Update(e.ctx, up.ID, memory.Patch{Label: &label})
	e.ok(err, "Update")
	if got := e.lexical([]string{"postgresql"}, f, 10); len(got) != 0 {
		e.t.Fatalf("old text still indexed: %v", got)
	}
	e.sameList("new text", ids(e.lexical([]string{"valkey"}, f, 10)), []string{up.ID})
}

func testLexicalFields(e *env) {
	body := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "a label", Body: "the body mentions quokka"})
	path := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "b label", Paths: []string{"internal/loader/reader.go"}})
	ent := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "c label",
		Entities: []memory.Entity{{Key: "k8s", Name: "Kubernetes"}}})
	f := memory.Filter{ProjectID: "p"}
	e.sameList("body", ids(e.lexical([]string{"quokka"}, f, 10)), []string{body.ID})
	e.sameList("path", ids(e.lexical([]string{"loader"}, f, 10)), []string{path.ID})
	e.sameList("entity name", ids(e.lexical([]string{"kubernetes"}, f, 10)), []string{ent.ID})
	e.sameSet("label", ids(e.lexical([]string{"label"}, f, 10)), []string{body.ID, path.ID, ent.ID})
}

// testLexicalLabelWeight: the label weighs twice (BM25F): of two memories
// with the same words, the one holding the query term in its label ranks
// first, although its document is the shorter one only because of that
// weighting. Counted once, the two would tie.
func testLexicalLabelWeight(e *env) {
	inLabel := e.upsert(memory.Node{Subkind: memory.Observation, ProjectID: "p", Label: "kettle descaling",
		Body: "notes on the weekly routine"})
	inBody := e.upsert(memory.Node{Subkind: memory.Observation, ProjectID: "p", Label: "notes on the weekly routine",
		Body: "kettle descaling"})
	f := memory.Filter{ProjectID: "p"}
	got := e.lexical([]string{"kettle"}, f, 10)
	e.sameList("label first", ids(got), []string{inLabel.ID, inBody.ID})
	if !(got[0].Score > got[1].Score) {
		e.t.Fatalf("label and body score alike (%v): the label must weigh more", got)
	}
	// A word of both fields' share: "routine" is in inBody's label.
	e.sameList("the other way round", ids(e.lexical([]string{"routine"}, f, 10)), []string{inBody.ID, inLabel.ID})
}

// testLexicalStemFamily: a query word matches the other forms of its stem
// family ("restaurants" -> "restaurant", "bus" -> "buses"), and its own
// token counts memory.ExactWeight more: the memory with the word as it was
// asked ranks first, above its plural and above the shorter memories that
// hold only a longer token of its prefix ("business").
func testLexicalStemFamily(e *env) {
	mk := func(label string) string { return e.upsert(node("p", memory.Observation, label)).ID }
	bus := mk("bus ride home today")
	buses := mk("buses ride home today")
	mk("busy ride home today")
	for i := range 6 {
		mk(fmt.Sprintf("business plan number %d", i))
	}
	rest := mk("restaurants near the office")
	restOne := mk("restaurant near the station")
	for i := range 8 {
		mk(fmt.Sprintf("filler note %c", 'a'+i))
	}
	f := memory.Filter{ProjectID: "p"}
	got := e.lexical([]string{"bus"}, f, 20)
	if len(got) < 3 || got[0].ID != bus {
		e.t.Fatalf("the word itself must rank first: %v", got)
	}
	found := map[string]float64{}
	for _, s := range got {
		found[s.ID] = s.Score
	}
	if _, ok := found[buses]; !ok {
		e.t.Fatalf("the plural is not matched: %v", got)
	}
	if !(got[0].Score > found[buses]) {
		e.t.Fatalf("the word and its plural score alike (%v): the word must weigh more", got)
	}
	got = e.lexical(memory.Terms("Restaurants?"), f, 10)
	e.sameList("stem family", ids(got), []string{rest, restOne})
	got = e.lexical([]string{"restaurant"}, f, 10)
	e.sameList("the other form", ids(got), []string{restOne, rest})
}

func testVectorRanking(e *env) {
	mk := func(label string, v []float32, model string) string {
		n := e.upsert(node("p", memory.Observation, label))
		e.ok(e.s.SetEmbedding(e.ctx, n.ID, model, v), "SetEmbedding")
		return n.ID
	}
	v1 := mk("v1", vec(1, 0, 0), "m")
	v2 := mk("v2", vec(0.9, 0.1, 0), "m")
	v3 := mk("v3", vec(0.5, 0.8, 0), "m")
	mk("v4", vec(-1, 0, 0), "m")          // opposite: not a candidate
	mk("other model", vec(1, 0, 0), "m2") // another model: not a candidate
	f := memory.Filter{ProjectID: "p"}
	sc, err := e.s.Vector(e.ctx, "m", vec(2, 0, 0), f, 10)
	e.ok(err, "Vector")
	e.ranked("vector", sc)
	byName := map[string]string{"v1": v1, "v2": v2, "v3": v3}
	if got := ids(sc); !equal(got, []string{v1, v2, v3}) {
		e.t.Fatalf("nearest first: %s", names(byName, got))
	}
	// Scores are cosine similarities, to within 0.01: a backend may search
	// quantized vectors (Redis stores int8 by default).
	want := []float64{1, 0.9 / math.Sqrt(0.82), 0.5 / math.Sqrt(0.89)}
	for i, s := range sc {
		if !near(s.Score, want[i], 0.01) {
			e.t.Fatalf("cosine of %s = %v, want %v", names(byName, []string{s.ID}), s.Score, want[i])
		}
	}
	sc, err = e.s.Vector(e.ctx, "m", vec(1, 0, 0), f, 2)
	e.ok(err, "Vector")
	e.sameList("limit 2", ids(sc), []string{v1, v2})
	sc, err = e.s.Vector(e.ctx, "m", vec(0, 1, 0), f, 10)
	e.ok(err, "Vector")
	if len(sc) == 0 || sc[0].ID != v3 {
		e.t.Fatalf("query (0,1,0): %s", names(byName, ids(sc)))
	}
	sc, err = e.s.Vector(e.ctx, "unknown-model", vec(1, 0, 0), f, 10)
	e.ok(err, "Vector unknown model")
	if len(sc) != 0 {
		e.t.Fatalf("unknown model: %v", sc)
	}
	// a new vector replaces the old one
	e.ok(e.s.SetEmbedding(e.ctx, v1, "m", vec(0, 0, 1)), "SetEmbedding")
	sc, err = e.s.Vector(e.ctx, "m", vec(1, 0, 0), f, 10)
	e.ok(err, "Vector")
	e.sameList("after re-embedding", ids(sc), []string{v2, v3})
}

// testVectorScores: memory.VectorScorer, which every backend implements,
// scores given nodes exactly (to within 0.01: quantized vectors), in any
// project, and leaves out nodes without a vector of the model.
func testVectorScores(e *env) {
	vs, ok := e.s.(memory.VectorScorer)
	if !ok {
		e.t.Fatal("the store does not implement memory.VectorScorer")
	}
	mk := func(project, label string, v []float32, model string) string {
		n := e.upsert(node(project, memory.Observation, label))
		if v != nil {
			e.ok(e.s.SetEmbedding(e.ctx, n.ID, model, v), "SetEmbedding")
		}
		return n.ID
	}
	a := mk("p", "a", vec(1, 0, 0), "m")
	b := mk("p", "b", vec(0.5, 0.8, 0), "m")
	c := mk("p", "c", vec(-1, 0.2, 0), "m") // negative cosines are scores too
	d := mk("q", "d", vec(0, 0, 2), "m")    // another project
	none := mk("p", "no vector", nil, "")
	other := mk("p", "other model", vec(1, 0, 0), "m2")
	got, err := vs.VectorScores(e.ctx, "m", vec(2, 0, 0.5), []string{a, b, c, d, none, other, "no-such-node"})
	e.ok(err, "VectorScores")
	qn := math.Sqrt(4.25)
	want := map[string]float64{a: 2 / qn, b: 1 / math.Sqrt(0.89) / qn, c: -2 / math.Sqrt(1.04) / qn, d: 0.5 / qn}
	if len(got) != len(want) {
		e.t.Fatalf("scores %v, want %d (nodes without a vector of the model left out)", got, len(want))
	}
	for _, s := range got {
		w, ok := want[s.ID]
		if !ok || !near(s.Score, w, 0.01) {
			e.t.Fatalf("score of %s = %v, want %v", s.ID, s.Score, w)
		}
	}
	got, err = vs.VectorScores(e.ctx, "unknown-model", vec(1, 0, 0), []string{a})
	e.ok(err, "VectorScores unknown model")
	if len(got) != 0 {
		e.t.Fatalf("unknown model: %v", got)
	}
}

func testByPaths(e *env) {
	p1 := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "p1", Paths: []string{"a.go", "b.go"}})
	e.c.Advance(time.Second)
	p2 := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "p2", Paths: []string{"a.go"}})
	e.c.Advance(time.Second)
	p3 := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "p3", Paths: []string{"c.go"}})
	e.c.Advance(time.Second)
	p4 := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "p4", Paths: []string{"b.go", "d.go"}})
	byName := map[string]string{"p1": p1.ID, "p2": p2.ID, "p3": p3.ID, "p4": p4.ID}
	f := memory.Filter{ProjectID: "p"}
	sc, err := e.s.ByPaths(e.ctx, []string{"a.go", "b.go"}, f, 10)
	e.ok(err, "ByPaths")
	e.ranked("paths", sc)
	if got := ids(sc); !equal(got, []string{p1.ID, p4.ID, p2.ID}) {
		e.t.Fatalf("more paths first, then newest: %s", names(byName, got))
	}
	if sc[0].Score != 2 || sc[1].Score != 1 || sc[2].Score != 1 {
		e.t.Fatalf("scores: %v", sc)
	}
	sc, err = e.s.ByPaths(e.ctx, []string{"a.go", "b.go"}, f, 1)
	e.ok(err, "ByPaths")
	e.sameList("limit", ids(sc), []string{p1.ID})
	sc, err = e.s.ByPaths(e.ctx, nil, f, 10)
	e.ok(err, "ByPaths")
	if len(sc) != 0 {
		e.t.Fatalf("no paths: %v", sc)
	}
	paths := []string{"c.go"}
	_, err = e.s.Update(e.ctx, p3.ID, memory.Patch{Paths: &[]string{"e.go"}})
	e.ok(err, "Update paths")
	sc, err = e.s.ByPaths(e.ctx, paths, f, 10)
	e.ok(err, "ByPaths")
	if len(sc) != 0 {
		e.t.Fatalf("old path still indexed: %v", sc)
	}
	sc, err = e.s.ByPaths(e.ctx, []string{"e.go"}, f, 10)
	e.ok(err, "ByPaths")
	e.sameList("new path", ids(sc), []string{p3.ID})
}

// testFilterMatrix checks every Filter rule on every channel and the
// timeline with a corpus in which every node matches every query.
func testFilterMatrix(e *env) {
	byName := map[string]string{}
	mk := func(name string, n memory.Node) {
		n.Label = "zebra " + name
		n.Paths = []string{"x.go"}
		if n.Subkind == "" {
			n.Subkind = memory.Observation
		}
		got := e.upsert(n)
		e.ok(e.s.SetEmbedding(e.ctx, got.ID, "m", vec(1, 0)), "SetEmbedding")
		byName[name] = got.ID
	}
	mk("own", memory.Node{Subkind: memory.Decision, ProjectID: "p"})
	mk("global", memory.Node{Subkind: memory.Preference})
	mk("otherHere", memory.Node{ProjectID: "q"})
	mk("otherAnywhere", memory.Node{ProjectID: "q", Reach: memory.ReachAnywhere})
	mk("sessOwn", memory.Node{Scope: memory.ScopeSession, ProjectID: "p", SessionID: "s1"})
	mk("sessOther", memory.Node{Scope: memory.ScopeSession, ProjectID: "p", SessionID: "s2"})
	mk("sessOtherProject", memory.Node{Scope: memory.ScopeSession, ProjectID: "q", SessionID: "s1", Reach: memory.ReachAnywhere})
	mk("archived", memory.Node{ProjectID: "p"})
	mk("superseded", memory.Node{ProjectID: "p"})
	mk("lowConf", memory.Node{ProjectID: "p", Confidence: 0.2})
	e.ok(e.s.Archive(e.ctx, byName["archived"]), "Archive")
	e.ok(e.s.Supersede(e.ctx, byName["superseded"], byName["own"]), "Supersede")
	past := Epoch.Add(-time.Hour)
	e.ok(e.s.PutBatch(e.ctx, []memory.Node{{ID: "closed-fact", Subkind: memory.Observation, ProjectID: "p", Label: "zebra closed",
		Paths: []string{"x.go"}, CreatedAt: past.Add(-time.Hour), ValidTo: past, Embedding: vec(1, 0), EmbeddingModel: "m"}}, nil), "PutBatch")
	byName["closed"] = "closed-fact"

	base := []string{"own", "global", "sessOwn", "lowConf"}
	cases := []struct {
		name string
		f    memory.Filter
		want []string
	}{
		{"own session", memory.Filter{ProjectID: "p", SessionID: "s1"}, base},
		{"cross-project", memory.Filter{ProjectID: "p", SessionID: "s1", CrossProject: true}, append(clone(base), "otherAnywhere")},
		{"other session", memory.Filter{ProjectID: "p", SessionID: "s2"}, []string{"own", "global", "sessOther", "lowConf"}},
		{"no session", memory.Filter{ProjectID: "p"}, []string{"own", "global", "lowConf"}},
		{"archived asked", memory.Filter{ProjectID: "p", SessionID: "s1", IncludeArchived: true}, append(clone(base), "archived")},
		{"superseded asked", memory.Filter{ProjectID: "p", SessionID: "s1", IncludeSuperseded: true}, append(clone(base), "superseded", "closed")},
		{"min confidence", memory.Filter{ProjectID: "p", SessionID: "s1", MinConfidence: 0.3}, []string{"own", "global", "sessOwn"}},
		{"subkinds", memory.Filter{ProjectID: "p", SessionID: "s1", Subkinds: []memory.Subkind{memory.Decision, memory.Preference}}, []string{"own", "global"}},
		{"project q", memory.Filter{ProjectID: "q"}, []string{"otherHere", "otherAnywhere", "global"}},
		{"project q session s1", memory.Filter{ProjectID: "q", SessionID: "s1"}, []string{"otherHere", "otherAnywhere", "global", "sessOtherProject"}},
		{"unknown project", memory.Filter{ProjectID: "nowhere", CrossProject: true}, []string{"global", "otherAnywhere"}},
	}
	for _, c := range cases {
		var want []string
		for _, n := range c.want {
			want = append(want, byName[n])
		}
		lex, err := e.s.Lexical(e.ctx, []string{"zebra"}, c.f, 50)
		e.ok(err, "Lexical")
		vs, err := e.s.Vector(e.ctx, "m", vec(1, 0), c.f, 50)
		e.ok(err, "Vector")
		ps, err := e.s.ByPaths(e.ctx, []string{"x.go"}, c.f, 50)
		e.ok(err, "ByPaths")
		tl, err := e.s.Timeline(e.ctx, memory.TimelineQuery{Filter: c.f, Limit: 50})
		e.ok(err, "Timeline")
		for ch, got := range map[string][]string{"lexical": ids(lex), "vector": ids(vs), "paths": ids(ps), "timeline": nodeIDs(tl)} {
			if !equal(sorted(got), sorted(want)) {
				e.t.Errorf("%s / %s: got %s, want %s", c.name, ch, names(byName, sorted(got)), names(byName, sorted(want)))
			}
		}
	}
}

func clone(ss []string) []string { return append([]string(nil), ss...) }

// testLexicalStopWords: a stop word of the query weighs
// memory.StopWordWeight: of two memories of one length, each holding one
// of the query's words once (each word in one memory: the same idf), the
// one with the content word ranks first, at twice the score.
func testLexicalStopWords(e *env) {
	content := e.upsert(node("p", memory.Observation, "zebra alpha beta gamma")).ID
	stop := e.upsert(node("p", memory.Observation, "what delta epsilon eta")).ID
	for i := range 6 {
		e.upsert(node("p", memory.Observation, fmt.Sprintf("filler %c note text", 'a'+i)))
	}
	got := e.lexical([]string{"what", "zebra"}, memory.Filter{ProjectID: "p"}, 10)
	e.sameList("content word first", ids(got), []string{content, stop})
	if r := got[1].Score / got[0].Score; !near(r, memory.StopWordWeight, 1e-4) {
		e.t.Fatalf("the stop word scores %v of the content word, want %v", r, memory.StopWordWeight)
	}
}

// testAdjacent: memory.Conversations, which every backend implements,
// names a memory's neighbours in its conversation: the same tenant,
// project and session, in memory.CompareConversation order (turns written
// at the same time in the natural order of their ids: t-9 before t-10),
// within memory.ConversationGap, nearest first, whatever their state; a
// write that moves a memory moves it in the index.
func testAdjacent(e *env) {
	cs, ok := e.s.(memory.Conversations)
	if !ok {
		e.t.Fatal("the store does not implement memory.Conversations")
	}
	at := Epoch.Add(-24 * time.Hour) // a session of yesterday: every turn written at once
	mk := func(id, tenant, project, session string, written time.Time) memory.Node {
		return memory.Node{ID: id, Subkind: memory.Observation, Scope: memory.ScopeProject, TenantID: tenant,
			ProjectID: project, SessionID: session, Label: "turn " + id, CreatedAt: written, UpdatedAt: written}
	}
	var batch []memory.Node
	for _, i := range []int{7, 3, 12, 1, 10, 5, 2, 9, 11, 4, 8, 6} { // out of order
		batch = append(batch, mk(fmt.Sprintf("t-%d", i), "", "p", "s1", at))
	}
	batch = append(batch,
		mk("t-0", "", "p", "s1", at.Add(-30*time.Minute)),  // within the gap before
		mk("t-13", "", "p", "s1", at.Add(2*time.Hour)),     // past the gap after
		mk("u-1", "", "p", "s2", at),                       // another session
		mk("q-1", "", "q", "s1", at),                       // another project
		mk("x-1", "other", "p", "s1", at.Add(time.Minute)), // another tenant
	)
	e.ok(e.s.PutBatch(e.ctx, batch, nil), "PutBatch")
	stored := func(ids ...string) []memory.Node {
		ns, err := e.s.GetMany(e.ctx, ids)
		e.ok(err, "GetMany")
		return ns
	}
	check := func(what string, got map[string]memory.Adjacency, id string, before, after []string) {
		e.t.Helper()
		a, ok := got[id]
		if !ok {
			e.t.Fatalf("%s: no entry for %s in %v", what, id, got)
		}
		if !slices.Equal(a.Before, before) || !slices.Equal(a.After, after) {
			e.t.Fatalf("%s: %s has %v before and %v after, want %v and %v", what, id, a.Before, a.After, before, after)
		}
	}
	got, err := cs.Adjacent(e.ctx, stored("t-5", "t-1", "t-9", "t-12", "u-1", "x-1"), 2)
	e.ok(err, "Adjacent")
	check("middle", got, "t-5", []string{"t-4", "t-3"}, []string{"t-6", "t-7"})
	check("first of its time", got, "t-1", []string{"t-0"}, []string{"t-2", "t-3"})
	check("natural order", got, "t-9", []string{"t-8", "t-7"}, []string{"t-10", "t-11"})
	check("last within the gap", got, "t-12", []string{"t-11", "t-10"}, nil)
	check("alone in its session", got, "u-1", nil, nil)
	check("alone in its tenant", got, "x-1", nil, nil)
	if len(got) != 6 {
		e.t.Fatalf("entries for %d nodes, want 6: %v", len(got), got)
	}
	// Archived memories still count (the caller filters); a write that
	// keeps a memory's place keeps it, one that moves it moves it.
	e.ok(e.s.Archive(e.ctx, "t-6"), "Archive")
	e.ok(e.s.Touch(e.ctx, []string{"t-4"}), "Touch")
	moved := stored("t-7")[0]
	moved.SessionID = "s2"
	e.ok(e.s.PutBatch(e.ctx, []memory.Node{moved}, nil), "PutBatch moving t-7")
	got, err = cs.Adjacent(e.ctx, stored("t-5", "u-1", "t-7"), 1)
	e.ok(err, "Adjacent after writes")
	check("after writes", got, "t-5", []string{"t-4"}, []string{"t-6"})
	check("t-7 joined s2", got, "t-7", nil, []string{"u-1"}) // at the same time: "t-7" < "u-1"
	check("u-1 has t-7 before it", got, "u-1", []string{"t-7"}, nil)
	got, err = cs.Adjacent(e.ctx, append(stored("t-6"), memory.Node{ID: "no-such-node", ProjectID: "p", SessionID: "s1"}), 3)
	e.ok(err, "Adjacent of an unknown node")
	check("skipping the moved one", got, "t-6", []string{"t-5", "t-4", "t-3"}, []string{"t-8", "t-9", "t-10"})
	if _, ok := got["no-such-node"]; ok {
		e.t.Fatalf("an unknown node has neighbours: %v", got)
	}
	if got, err := cs.Adjacent(e.ctx, stored("t-5"), 0); err != nil || len(got["t-5"].Before)+len(got["t-5"].After) != 0 {
		e.t.Fatalf("k 0: %v, %v", got, err)
	}
}

// testLexicalCommonWords: a common word (memory.CommonShare of the
// memories) brings in no memory once the rarer words found enough, but
// when the filter rejects what they found, the memories only the common
// word matches are searched too.
func testLexicalCommonWords(e *env) {
	var batch []memory.Node
	mk := func(id, label string, k memory.Subkind) {
		batch = append(batch, memory.Node{ID: id, Subkind: k, Scope: memory.ScopeProject, ProjectID: "p", Label: label + " u" + id, Confidence: 0.9})
	}
	for i := range 12 { // the rare word's memories: decisions
		mk(fmt.Sprintf("b%02d", i), "beta alpha", memory.Decision)
	}
	for i := range 30 { // the common word alone: five of them observations
		k := memory.Decision
		if i < 5 {
			k = memory.Observation
		}
		mk(fmt.Sprintf("a%02d", i), "alpha", k)
	}
	for i := range 40 {
		mk(fmt.Sprintf("g%02d", i), "gamma", memory.Decision)
	}
	e.ok(e.s.PutBatch(e.ctx, batch, nil), "PutBatch")
	got := e.lexical([]string{"alpha", "beta"}, memory.Filter{ProjectID: "p"}, 5)
	for _, s := range got {
		if s.ID[0] != 'b' {
			e.t.Fatalf("the rare word's memories must lead: %v", got)
		}
	}
	got = e.lexical([]string{"alpha", "beta"}, memory.Filter{ProjectID: "p", Subkinds: []memory.Subkind{memory.Observation}}, 5)
	e.sameSet("observations only", ids(got), []string{"a00", "a01", "a02", "a03", "a04"})
}
