package memory

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func mustPrepare(t *testing.T, n Node) Node {
	t.Helper()
	p, err := PrepareNew(n, t0)
	if err != nil {
		t.Fatalf("PrepareNew: %v", err)
	}
	return p
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id := NewID()
		if len(id) != 24 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("bad id %q", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestPrepareNewDefaults(t *testing.T) {
	n := mustPrepare(t, Node{Subkind: Decision, ProjectID: "p", Label: "  Use  WAL ", Body: "password=hunter2",
		Paths: []string{" a.go", "a.go", "", "b.go"}, Weight: 99, Confidence: 7,
		Entities: []Entity{{Key: " Redis "}, {Key: "redis", Name: "dup"}, {Name: "Go Lang"}}})
	if n.ID == "" || n.Scope != ScopeProject || n.Source != SourceAgent || n.AssertedBy != AssertedInferred || n.Reach != ReachHere {
		t.Fatalf("defaults: %+v", n)
	}
	if n.Label != "Use  WAL" || n.Body != "password=[redacted]" {
		t.Fatalf("text: %q %q", n.Label, n.Body)
	}
	if n.Digest != Digest(Decision, "use wal", "password=[redacted]", "") {
		t.Fatalf("digest %q not over redacted, normalised text", n.Digest)
	}
	if n.Weight != MaxWeight || n.Confidence != 1 {
		t.Fatalf("clamp: weight %v confidence %v", n.Weight, n.Confidence)
	}
	if len(n.Paths) != 2 || n.Paths[0] != "a.go" || n.Paths[1] != "b.go" {
		t.Fatalf("paths %q", n.Paths)
	}
	if len(n.Entities) != 2 || n.Entities[0] != (Entity{Key: "redis", Name: "Redis"}) || n.Entities[1].Key != "go lang" {
		t.Fatalf("entities %+v", n.Entities)
	}
	if !n.CreatedAt.Equal(t0) || !n.UpdatedAt.Equal(t0) || !n.ValidFrom.Equal(t0) {
		t.Fatalf("times %v %v %v", n.CreatedAt, n.UpdatedAt, n.ValidFrom)
	}
	g := mustPrepare(t, Node{Subkind: Preference, Label: "x", Source: SourceUser, Weight: -3})
	if g.Scope != ScopeGlobal || g.AssertedBy != AssertedUser || g.Confidence != DefaultConfidence || g.Weight != MinWeight {
		t.Fatalf("global defaults: %+v", g)
	}
	var es []Entity
	for i := range 12 {
		es = append(es, Entity{Key: string(rune('a' + i))})
	}
	if e := mustPrepare(t, Node{Subkind: EntityKind, ProjectID: "p", Label: "x", Entities: es}); len(e.Entities) != MaxEntities {
		t.Fatalf("entity cap: %d", len(e.Entities))
	}
}

func TestPrepareNewInvalidListsAll(t *testing.T) {
	_, err := PrepareNew(Node{Subkind: "bogus", Scope: ScopeSession, Source: "x", AssertedBy: "y", Reach: "z",
		Confidence: math.NaN(), Embedding: []float32{1}}, t0)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"empty", "subkind", "project id", "session id", "source", "asserted-by", "reach", "confidence", "model"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := PrepareNew(Node{Subkind: Decision, Scope: ScopeGlobal, ProjectID: "p", Label: "x"}, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("global with project: %v", err)
	}
}

func TestReinforce(t *testing.T) {
	old := mustPrepare(t, Node{Subkind: Pattern, ProjectID: "p", Label: "Run make lint", Confidence: 0.6, Weight: 9.9,
		Source: SourceUser, AssertedBy: AssertedAssistant, StaleAt: t0, Paths: []string{"a"}})
	old.Useful = 3
	in := Node{Subkind: Pattern, ProjectID: "p", Label: "run MAKE lint", Confidence: 0.4, Source: SourceAgent,
		AssertedBy: AssertedUser, Reach: ReachAnywhere, Paths: []string{"b"}}
	later := t0.Add(time.Hour)
	n := Reinforce(old, in, later)
	if n.Weight != MaxWeight || n.Confidence != 0.6 || !n.StaleAt.IsZero() || n.AssertedBy != AssertedUser || n.Reach != ReachAnywhere {
		t.Fatalf("reinforce: %+v", n)
	}
	if n.Label != "Run make lint" || n.Source != SourceUser {
		t.Fatalf("model overwrote user text: %q %s", n.Label, n.Source)
	}
	if n.Useful != 3 || n.ID != old.ID || !n.UpdatedAt.Equal(later) || len(n.Paths) != 2 {
		t.Fatalf("kept fields: %+v", n)
	}
	// authority and reach never fall; a user's text replaces a model's
	n2 := Reinforce(n, Node{AssertedBy: AssertedInferred, Reach: ReachHere, Confidence: 0.9}, later)
	if n2.AssertedBy != AssertedUser || n2.Reach != ReachAnywhere || n2.Confidence != 0.9 {
		t.Fatalf("fell: %+v", n2)
	}
	agent := mustPrepare(t, Node{Subkind: Pattern, ProjectID: "p", Label: "run make lint", Weight: 2})
	u := Reinforce(agent, Node{Label: "Run Make Lint", Source: SourceUser, AssertedBy: AssertedUser}, later)
	if u.Label != "Run Make Lint" || u.Source != SourceUser || u.Weight != 2.25 {
		t.Fatalf("user text: %+v", u)
	}
	arch := agent
	arch.ArchivedAt = t0
	if r := Reinforce(arch, Node{AssertedBy: AssertedAssistant}, later); r.ArchivedAt.IsZero() {
		t.Fatal("a model's re-upsert restored a forgotten memory")
	}
	if r := Reinforce(arch, Node{AssertedBy: AssertedUser}, later); !r.ArchivedAt.IsZero() {
		t.Fatal("a user's re-assertion did not restore")
	}
}

func TestApplyPatch(t *testing.T) {
	n := mustPrepare(t, Node{Subkind: Decision, ProjectID: "p", Label: "a", Body: "b", Embedding: []float32{1}, EmbeddingModel: "m"})
	label := "new label token=abc"
	later := t0.Add(time.Minute)
	got, err := ApplyPatch(n, Patch{Label: &label}, later)
	if err != nil {
		t.Fatal(err)
	}
	if got.Label != "new label token=[redacted]" || got.Digest == n.Digest || got.Embedding != nil || got.EmbeddingModel != "" || !got.UpdatedAt.Equal(later) {
		t.Fatalf("patch: %+v", got)
	}
	conf := 0.9
	same, err := ApplyPatch(n, Patch{Confidence: &conf}, later)
	if err != nil || same.Digest != n.Digest || same.Embedding == nil || same.Confidence != 0.9 {
		t.Fatalf("non-text patch: %+v %v", same, err)
	}
	user := n
	user.Source = SourceUser
	user.AssertedBy = AssertedUser
	if _, err := ApplyPatch(user, Patch{Label: &label}, later); !errors.Is(err, ErrRefused) {
		t.Fatalf("an unattributed patch of user text: %v", err)
	}
	src := SourceUser
	if got, err := ApplyPatch(user, Patch{Label: &label, Source: &src}, later); err != nil || got.Label != "new label token=[redacted]" || got.Source != SourceUser {
		t.Fatalf("user patch: %+v %v", got, err)
	}
	// An agent's deliberate correction takes the text over: the source
	// becomes the agent, and the text is no longer what the user said: it
	// is asserted by the assistant, not the user, and no longer pinned (a
	// standing instruction the user stated no more).
	agent := SourceAgent
	pinned := user
	pinned.Pinned = true
	got, err = ApplyPatch(pinned, Patch{Label: &label, Source: &agent}, later)
	if err != nil || got.Label != "new label token=[redacted]" || got.Source != SourceAgent || got.AssertedBy != AssertedAssistant ||
		got.Pinned || IsStanding(&got) {
		t.Fatalf("agent patch of user text: %+v %v", got, err)
	}
	// The user's own patch keeps both.
	if got, err := ApplyPatch(pinned, Patch{Label: &label, Source: &src}, later); err != nil || got.AssertedBy != AssertedUser || !got.Pinned {
		t.Fatalf("user patch of a pinned user rule: %+v %v", got, err)
	}
	// An unattributed patch of an agent-sourced user rule: inferred.
	agentWritten := user
	agentWritten.Source = SourceAgent
	if got, err := ApplyPatch(agentWritten, Patch{Label: &label}, later); err != nil || got.AssertedBy != AssertedInferred {
		t.Fatalf("unattributed patch of a user rule: %+v %v", got, err)
	}
	// A patch that changes no text keeps the authority and the pin.
	if got, err := ApplyPatch(pinned, Patch{Confidence: &conf, Source: &agent}, later); err != nil || got.AssertedBy != AssertedUser || !got.Pinned {
		t.Fatalf("a non-text agent patch of a pinned user rule: %+v %v", got, err)
	}
	// A patch that changes no text leaves the source alone.
	if got, err := ApplyPatch(user, Patch{Confidence: &conf, Source: &agent}, later); err != nil || got.Source != SourceUser {
		t.Fatalf("a non-text agent patch: %+v %v", got, err)
	}
	bad := Subkind("nope")
	empty := ""
	if _, err := ApplyPatch(n, Patch{Subkind: &bad, Label: &empty, Body: &empty}, later); !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), "subkind") || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("invalid patch: %v", err)
	}
}

func TestApplyVerdict(t *testing.T) {
	n := Node{Weight: 9.8, Confidence: 0.98}
	u := ApplyVerdict(n, VerdictUsed, t0)
	if u.Useful != 1 || u.Weight != 10 || u.Confidence != 1 {
		t.Fatalf("used: %+v", u)
	}
	u = ApplyVerdict(Node{Weight: 1, Confidence: 0.5}, VerdictUsed, t0)
	if u.Weight != 1.5 || !near(u.Confidence, 0.55) {
		t.Fatalf("used: %+v", u)
	}
	w := ApplyVerdict(Node{Confidence: 0.2}, VerdictWrong, t0)
	if w.Unhelpful != 1 || w.Confidence != MinConfidence {
		t.Fatalf("wrong: %+v", w)
	}
	w = ApplyVerdict(Node{Confidence: 0.7}, VerdictWrong, t0)
	if !near(w.Confidence, 0.5) {
		t.Fatalf("wrong: %+v", w)
	}
	i := ApplyVerdict(Node{Confidence: 0.7, Weight: 2}, VerdictIgnored, t0)
	if i.Unhelpful != 1 || i.Confidence != 0.7 || i.Weight != 2 {
		t.Fatalf("ignored: %+v", i)
	}
}

func TestMarkStale(t *testing.T) {
	for _, c := range []struct {
		k    Subkind
		want float64
	}{{Observation, 0.82}, {Failure, 0.92}, {Pattern, 0.97}, {Decision, 1}, {Preference, 1}, {EntityKind, 1}} {
		n, ok := MarkStale(Node{Subkind: c.k, Confidence: 1}, t0)
		if !ok || !near(n.Confidence, c.want) || !n.StaleAt.Equal(t0) || StaleFactor(c.k) != c.want {
			t.Errorf("%s: %v %v", c.k, ok, n.Confidence)
		}
	}
	n, _ := MarkStale(Node{Subkind: Observation, Confidence: 0.06}, t0)
	if n.Confidence != MinConfidence {
		t.Fatalf("min: %v", n.Confidence)
	}
	if _, ok := MarkStale(Node{Subkind: Observation, Confidence: 1, Pinned: true}, t0); ok {
		t.Fatal("pinned decayed")
	}
	if _, ok := MarkStale(Node{Subkind: Observation, Confidence: 1, Source: SourceUser}, t0); ok {
		t.Fatal("user-sourced decayed")
	}
	if _, ok := MarkStale(Node{Subkind: Observation, Confidence: 1, ArchivedAt: t0}, t0); ok {
		t.Fatal("archived decayed")
	}
	n, _ = MarkStale(Node{Subkind: Observation, Confidence: 1}, t0)
	if _, ok := MarkStale(n, t0.Add(5*time.Hour)); ok {
		t.Fatal("decayed again within 6 h")
	}
	if n2, ok := MarkStale(n, t0.Add(6*time.Hour)); !ok || !near(n2.Confidence, 0.82*0.82) {
		t.Fatalf("not decayed after 6 h: %v", n2.Confidence)
	}
}

func TestCheckSupersede(t *testing.T) {
	user := Node{ID: "a", AssertedBy: AssertedUser, Scope: ScopeProject}
	model := Node{ID: "b", AssertedBy: AssertedAssistant, Scope: ScopeGlobal}
	if err := CheckSupersede(user, model); !errors.Is(err, ErrRefused) {
		t.Fatalf("lower authority: %v", err)
	}
	sess := Node{ID: "c", AssertedBy: AssertedUser, Scope: ScopeSession}
	if err := CheckSupersede(user, sess); !errors.Is(err, ErrRefused) {
		t.Fatalf("narrower scope: %v", err)
	}
	if err := CheckSupersede(model, Node{ID: "d", AssertedBy: AssertedAssistant, Scope: ScopeGlobal}); err != nil {
		t.Fatalf("equal: %v", err)
	}
	if err := CheckSupersede(sess, user); err != nil {
		t.Fatalf("wider: %v", err)
	}
	if err := CheckSupersede(user, user); !errors.Is(err, ErrInvalid) {
		t.Fatalf("self: %v", err)
	}
}

func TestVisible(t *testing.T) {
	f := Filter{ProjectID: "p", SessionID: "s"}
	cases := []struct {
		name string
		n    Node
		f    Filter
		want bool
	}{
		{"own project", Node{ProjectID: "p", Scope: ScopeProject}, f, true},
		{"global", Node{Scope: ScopeGlobal}, f, true},
		{"other project", Node{ProjectID: "q", Scope: ScopeProject, Reach: ReachAnywhere}, f, false},
		{"other project cross here", Node{ProjectID: "q", Scope: ScopeProject, Reach: ReachHere}, Filter{ProjectID: "p", CrossProject: true}, false},
		{"other project cross anywhere", Node{ProjectID: "q", Scope: ScopeProject, Reach: ReachAnywhere}, Filter{ProjectID: "p", CrossProject: true}, true},
		{"own session", Node{ProjectID: "p", Scope: ScopeSession, SessionID: "s"}, f, true},
		{"other session", Node{ProjectID: "p", Scope: ScopeSession, SessionID: "t"}, f, false},
		{"other project same session name", Node{ProjectID: "q", Scope: ScopeSession, SessionID: "s", Reach: ReachAnywhere}, Filter{ProjectID: "p", SessionID: "s", CrossProject: true}, false},
		{"archived", Node{ProjectID: "p", ArchivedAt: t0}, f, false},
		{"archived asked", Node{ProjectID: "p", ArchivedAt: t0}, Filter{ProjectID: "p", IncludeArchived: true}, true},
		{"superseded", Node{ProjectID: "p", SupersededBy: "x"}, f, false},
		{"closed", Node{ProjectID: "p", ValidTo: t0}, f, false},
		{"closes later", Node{ProjectID: "p", ValidTo: t0.Add(time.Hour)}, f, true},
		{"closed asked", Node{ProjectID: "p", ValidTo: t0}, Filter{ProjectID: "p", IncludeSuperseded: true}, true},
		{"min confidence", Node{ProjectID: "p", Confidence: 0.2}, Filter{ProjectID: "p", MinConfidence: 0.3}, false},
		{"subkind", Node{ProjectID: "p", Subkind: Failure}, Filter{ProjectID: "p", Subkinds: []Subkind{Decision}}, false},
		{"subkind ok", Node{ProjectID: "p", Subkind: Decision}, Filter{ProjectID: "p", Subkinds: []Subkind{Decision}}, true},
	}
	for _, c := range cases {
		if got := Visible(&c.n, c.f, t0); got != c.want {
			t.Errorf("%s: Visible = %v", c.name, got)
		}
	}
}

func TestStanding(t *testing.T) {
	base := Node{ProjectID: "p", Scope: ScopeProject, Subkind: Preference, AssertedBy: AssertedUser, Confidence: 0.5}
	if !IsStanding(&base) || !StandingFor(&base, ProjectRef{Project: "p"}) || StandingFor(&base, ProjectRef{Project: "q"}) || StandingFor(&base, ProjectRef{Tenant: "t", Project: "p"}) {
		t.Fatal("base")
	}
	for name, mut := range map[string]func(*Node){
		"inferred":    func(n *Node) { n.AssertedBy = AssertedInferred },
		"low conf":    func(n *Node) { n.Confidence = 0.29 },
		"observation": func(n *Node) { n.Subkind = Observation },
		"session":     func(n *Node) { n.Scope = ScopeSession },
		"archived":    func(n *Node) { n.ArchivedAt = t0 },
		"superseded":  func(n *Node) { n.SupersededBy = "x" },
	} {
		n := base
		mut(&n)
		if IsStanding(&n) {
			t.Errorf("%s is standing", name)
		}
	}
	pinnedInferred := base
	pinnedInferred.AssertedBy, pinnedInferred.Pinned = AssertedInferred, true
	if !IsStanding(&pinnedInferred) {
		t.Fatal("pinned not standing")
	}
	nodes := []Node{
		{ID: "pat", Subkind: Pattern, UpdatedAt: t0.Add(5 * time.Hour)},
		{ID: "dec-old", Subkind: Decision, UpdatedAt: t0},
		{ID: "pref", Subkind: Preference, UpdatedAt: t0},
		{ID: "dec-new", Subkind: Decision, UpdatedAt: t0.Add(time.Hour)},
		{ID: "pin-pat", Subkind: Pattern, Pinned: true, UpdatedAt: t0},
	}
	got := SortStanding(nodes, 4)
	want := []string{"pin-pat", "pref", "dec-new", "dec-old"}
	for i := range want {
		if got[i].ID != want[i] {
			t.Fatalf("order %v", got)
		}
	}
	if len(got) != 4 {
		t.Fatalf("limit: %d", len(got))
	}
}

func TestEdges(t *testing.T) {
	e, err := PrepareEdge(Edge{Src: "a", Dst: "b", Relation: RelatesTo}, t0)
	if err != nil || e.Weight != 1 || e.Source != SourceAgent || !e.ValidFrom.Equal(t0) {
		t.Fatalf("%+v %v", e, err)
	}
	if _, err := PrepareEdge(Edge{Src: "a", Dst: "a", Relation: RelatesTo}, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("self-link: %v", err)
	}
	if _, err := PrepareEdge(Edge{Src: "a", Dst: "b", Relation: "likes"}, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("relation: %v", err)
	}
	e.Weight = 9.9
	if r := Relink(e, Edge{Source: SourceUser}); r.Weight != MaxWeight || r.Source != SourceUser {
		t.Fatalf("relink: %+v", r)
	}
	if r := Relink(Edge{Weight: 1}, Edge{}); r.Weight != 1.25 {
		t.Fatalf("relink step: %v", r.Weight)
	}
	if CheckHops(0) == nil || CheckHops(4) == nil || CheckHops(3) != nil {
		t.Fatal("hops")
	}
}

func TestValidAt(t *testing.T) {
	n := Node{CreatedAt: t0, ValidFrom: t0, ValidTo: t0.Add(time.Hour)}
	if ValidAt(&n, t0.Add(-time.Second)) || !ValidAt(&n, t0) || !ValidAt(&n, t0.Add(59*time.Minute)) || ValidAt(&n, t0.Add(time.Hour)) {
		t.Fatal("ValidAt")
	}
}
