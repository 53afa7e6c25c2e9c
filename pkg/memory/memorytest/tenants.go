package memorytest

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// tenantTests hold the tenant boundary: two tenants that use the same
// project ids, session ids and texts share nothing, and "global" is global
// within a tenant.
var tenantTests = []subtest{
	{"Tenants/Nodes", testTenantNodes},
	{"Tenants/Channels", testTenantChannels},
	{"Tenants/Standing", testTenantStanding},
	{"Tenants/Graph", testTenantGraph},
	{"Tenants/Batch", testTenantBatch},
	{"Tenants/Sessions", testTenantSessions},
	{"Tenants/Journal", testTenantJournal},
	{"Tenants/Invalid", testTenantInvalid},
	{"Tenants/Statistics", testTenantStatistics},
}

// testTenantStatistics: a tenant's lexical scores are its own memories'
// doing. Another tenant writing many memories that hold the query's words
// (and words its prefix expands to) changes none of them, nor does its
// erasure: a score that moved would tell a tenant how many of another
// tenant's memories hold a word (the SQLite store's statistics were the
// store's until stop 47).
func testTenantStatistics(e *env) {
	for i, label := range []string{"deploy the billing service with make release", "the deployment runs on friday evenings",
		"billing invoices are sent monthly", "release notes go to the wiki", "never deploy on fridays"} {
		p := "p"
		if i == 4 {
			p = ""
		}
		e.upsert(tnode("a", p, memory.Decision, label))
	}
	queries := [][]string{{"deploy"}, {"billing", "release"}, {"deployment", "friday"}}
	scores := func(when string) [][]memory.Scored {
		var out [][]memory.Scored
		for _, cross := range []bool{false, true} {
			for _, q := range queries {
				got, err := e.s.Lexical(e.ctx, q, memory.Filter{TenantID: "a", ProjectID: "p", CrossProject: cross}, 10)
				e.ok(err, "Lexical "+when)
				if len(got) == 0 {
					e.t.Fatalf("%s: no hit for %v", when, q)
				}
				out = append(out, got)
			}
		}
		return out
	}
	same := func(when string, got, want [][]memory.Scored) {
		for i := range want {
			ok := len(got[i]) == len(want[i])
			for j := 0; ok && j < len(got[i]); j++ {
				ok = got[i][j].ID == want[i][j].ID && math.Abs(got[i][j].Score-want[i][j].Score) < 1e-9
			}
			if !ok {
				e.t.Errorf("%s, query %d: tenant a's scores %v, before %v", when, i, got[i], want[i])
			}
		}
	}
	before := scores("alone")
	var batch []memory.Node
	for i := range 60 {
		for _, p := range []string{"p", "other", ""} {
			n := tnode("b", p, memory.Decision, fmt.Sprintf("deploy billing release deployments%02d friday note %d of %s", i, i, p))
			n.Reach = memory.ReachAnywhere
			batch = append(batch, n)
		}
	}
	e.ok(e.s.PutBatch(e.ctx, batch, nil), "PutBatch of tenant b")
	same("beside tenant b", scores("beside tenant b"), before)
	_, err := e.s.Erase(e.ctx, memory.EraseScope{Tenant: "b"}, nil)
	e.ok(err, "Erase tenant b")
	same("after tenant b's erasure", scores("after tenant b's erasure"), before)
}

// tnode is a memory of tenant t in project p ("" : global).
func tnode(t, p string, k memory.Subkind, label string) memory.Node {
	n := memory.Node{TenantID: t, Subkind: k, Scope: memory.ScopeProject, ProjectID: p, Label: label}
	if p == "" {
		n.Scope = memory.ScopeGlobal
	}
	return n
}

// testTenantNodes: the same text in the same project id of two tenants is
// two memories; each tenant's per-project reads see its own only.
func testTenantNodes(e *env) {
	a := e.upsert(tnode("a", "p", memory.Decision, "deploys run through make release"))
	b, err := e.s.Upsert(e.ctx, tnode("b", "p", memory.Decision, "deploys run through make release"))
	e.ok(err, "Upsert in tenant b")
	if !b.Created || b.Node.ID == a.ID || b.Node.TenantID != "b" {
		e.t.Fatalf("the same digest in another tenant must be a new node: %+v", b)
	}
	d := e.upsert(node("p", memory.Decision, "deploys run through make release")) // the default tenant
	if d.ID == a.ID || d.ID == b.Node.ID || d.TenantID != "" {
		e.t.Fatalf("the default tenant is a tenant of its own: %+v", d)
	}
	again, err := e.s.Upsert(e.ctx, tnode("a", "p", memory.Decision, "deploys run through make release"))
	e.ok(err, "Upsert again in tenant a")
	if again.Created || again.Node.ID != a.ID {
		e.t.Fatalf("a repeat within the tenant reinforces its node: %+v", again)
	}
	if got := e.get(b.Node.ID); got.TenantID != "b" {
		e.t.Fatalf("Get: tenant %q", got.TenantID)
	}
	// An id another tenant holds cannot be taken, and the refusal does not
	// name the other tenant.
	steal := tnode("thief", "p", memory.Observation, "a text of my own")
	steal.ID = a.ID
	_, err = e.s.Upsert(e.ctx, steal)
	e.is(err, memory.ErrInvalid, "Upsert with another tenant's id")
	if strings.Contains(err.Error(), `"a"`) || strings.Contains(err.Error(), "\xff") {
		e.t.Fatalf("the refusal names the other tenant: %v", err)
	}
	if got := e.get(a.ID); got.TenantID != "a" || got.Label != a.Label {
		e.t.Fatalf("the refused upsert changed the node: %+v", got)
	}

	for _, tc := range []struct {
		tenant string
		want   string
	}{{"a", a.ID}, {"b", b.Node.ID}, {"", d.ID}} {
		owners, err := e.s.DigestOwners(e.ctx, memory.ProjectRef{Tenant: tc.tenant, Project: "p"}, []string{a.Digest})
		e.ok(err, "DigestOwners")
		if len(owners) != 1 || owners[a.Digest].ID != tc.want {
			e.t.Fatalf("DigestOwners of tenant %q: %v, want %s", tc.tenant, owners, tc.want)
		}
	}
	if live, err := e.s.HasLiveMemory(e.ctx, memory.ProjectRef{Tenant: "c", Project: "p"}); err != nil || live {
		e.t.Fatalf("HasLiveMemory of an empty tenant: %v %v", live, err)
	}
	if live, err := e.s.HasLiveMemory(e.ctx, memory.ProjectRef{Tenant: "a", Project: "other"}); err != nil || live {
		e.t.Fatalf("HasLiveMemory of a's other project (no global memory in a): %v %v", live, err)
	}
	if pending, err := e.s.HasPendingEmbeddings(e.ctx, memory.ProjectRef{Tenant: "c", Project: "p"}, "m"); err != nil || pending {
		e.t.Fatalf("HasPendingEmbeddings of an empty tenant: %v %v", pending, err)
	}
	if pending, err := e.s.HasPendingEmbeddings(e.ctx, memory.ProjectRef{Tenant: "a", Project: "p"}, "m"); err != nil || !pending {
		e.t.Fatalf("HasPendingEmbeddings of a/p: %v %v", pending, err)
	}
	e.ok(e.s.SetEmbedding(e.ctx, a.ID, "m", vec(1, 0, 0)), "SetEmbedding")
	if pending, err := e.s.HasPendingEmbeddings(e.ctx, memory.ProjectRef{Tenant: "a", Project: "p"}, "m"); err != nil || pending {
		e.t.Fatalf("HasPendingEmbeddings of a/p once embedded (b's backlog is b's): %v %v", pending, err)
	}
	c, err := e.s.Count(e.ctx, memory.ProjectRef{Tenant: "b", Project: "p"}, "m")
	e.ok(err, "Count")
	if c.Live != 1 || c.Pending != 1 {
		e.t.Fatalf("Count of b/p: %+v", c)
	}

	// MarkStale of one tenant leaves the other's memory of the same path alone.
	pa := tnode("a", "p", memory.Pattern, "main.go holds the router")
	pa.Paths = []string{"main.go"}
	pa = e.upsert(pa)
	pb := tnode("b", "p", memory.Pattern, "main.go holds the router")
	pb.Paths = []string{"main.go"}
	pb = e.upsert(pb)
	marked, err := e.s.MarkStale(e.ctx, memory.ProjectRef{Tenant: "b", Project: "p"}, []string{"main.go"})
	e.ok(err, "MarkStale")
	e.sameList("MarkStale of tenant b", marked, []string{pb.ID})
	if got := e.get(pa.ID); got.Stale() {
		e.t.Fatal("MarkStale of tenant b marked tenant a's memory")
	}
}

// testTenantChannels: global (no project) memories and reach anywhere stay
// inside the tenant on every channel and listing.
func testTenantChannels(e *env) {
	type seeded struct{ global, anywhere, own memory.Node }
	seed := func(t string) seeded {
		g := tnode(t, "", memory.Preference, "always answer in indonesian")
		g.Paths = []string{"README.md"}
		g = e.upsert(g)
		w := tnode(t, "elsewhere", memory.Pattern, "indonesian greetings open every answer")
		w.Reach, w.Paths = memory.ReachAnywhere, []string{"README.md"}
		w = e.upsert(w)
		o := tnode(t, "p", memory.Observation, "indonesian is the user's first language")
		o.Paths = []string{"README.md"}
		o = e.upsert(o)
		for i, n := range []memory.Node{g, w, o} {
			e.ok(e.s.SetEmbedding(e.ctx, n.ID, "m", vec(1, float32(i)/10, 0)), "SetEmbedding")
		}
		return seeded{g, w, o}
	}
	sa, sb := seed("a"), seed("b")
	for _, tc := range []struct {
		tenant string
		mine   seeded
		theirs seeded
	}{{"a", sa, sb}, {"b", sb, sa}} {
		for _, cross := range []bool{false, true} {
			f := memory.Filter{TenantID: tc.tenant, ProjectID: "p", CrossProject: cross}
			want := []string{tc.mine.global.ID, tc.mine.own.ID}
			if cross {
				want = append(want, tc.mine.anywhere.ID)
			}
			lex, err := e.s.Lexical(e.ctx, []string{"indonesian"}, f, 10)
			e.ok(err, "Lexical")
			e.sameSet("Lexical of tenant "+tc.tenant, ids(lex), want)
			vs, err := e.s.Vector(e.ctx, "m", vec(1, 0.1, 0), f, 10)
			e.ok(err, "Vector")
			e.sameSet("Vector of tenant "+tc.tenant, ids(vs), want)
			bp, err := e.s.ByPaths(e.ctx, []string{"README.md"}, f, 10)
			e.ok(err, "ByPaths")
			e.sameSet("ByPaths of tenant "+tc.tenant, ids(bp), want)
			tl, err := e.s.Timeline(e.ctx, memory.TimelineQuery{Filter: f})
			e.ok(err, "Timeline")
			e.sameSet("Timeline of tenant "+tc.tenant, nodeIDs(tl), want)
			asOf, err := e.s.Timeline(e.ctx, memory.TimelineQuery{Filter: f, AsOf: e.c.Now()})
			e.ok(err, "Timeline as of")
			e.sameSet("Timeline as of, tenant "+tc.tenant, nodeIDs(asOf), want)
		}
		// A project of another tenant with the same id sees none of them,
		// and a global filter (no project) sees the tenant's global only.
		f := memory.Filter{TenantID: tc.tenant}
		lex, err := e.s.Lexical(e.ctx, []string{"indonesian"}, f, 10)
		e.ok(err, "Lexical of the tenant's global space")
		e.sameSet("global space of tenant "+tc.tenant, ids(lex), []string{tc.mine.global.ID})
		if live, err := e.s.HasLiveMemory(e.ctx, memory.ProjectRef{Tenant: tc.tenant, Project: "new"}); err != nil || !live {
			e.t.Fatalf("HasLiveMemory of a new project sees its tenant's global memory: %v %v", live, err)
		}
	}
	for _, f := range []memory.Filter{{TenantID: "c", ProjectID: "p", CrossProject: true}, {ProjectID: "p", CrossProject: true}} {
		lex, err := e.s.Lexical(e.ctx, []string{"indonesian"}, f, 10)
		e.ok(err, "Lexical")
		vs, err := e.s.Vector(e.ctx, "m", vec(1, 0, 0), f, 10)
		e.ok(err, "Vector")
		if len(lex)+len(vs) != 0 {
			e.t.Fatalf("tenant %q sees another tenant's memories: %v %v", f.TenantID, lex, vs)
		}
	}
}

// testTenantStanding: standing instructions are the project's and its
// tenant's global ones.
func testTenantStanding(e *env) {
	rule := func(t, p, label string) memory.Node {
		n := tnode(t, p, memory.Preference, label)
		n.Source = memory.SourceUser
		return e.upsert(n)
	}
	ga := rule("a", "", "always answer in indonesian")
	pa := rule("a", "p", "use tabs")
	gb := rule("b", "", "never use emoji")
	pd := rule("", "p", "use spaces")
	for _, tc := range []struct {
		ref  memory.ProjectRef
		want []string
	}{
		{memory.ProjectRef{Tenant: "a", Project: "p"}, []string{ga.ID, pa.ID}},
		{memory.ProjectRef{Tenant: "a", Project: "q"}, []string{ga.ID}},
		{memory.ProjectRef{Tenant: "a"}, []string{ga.ID}},
		{memory.ProjectRef{Tenant: "b", Project: "p"}, []string{gb.ID}},
		{memory.ProjectRef{Project: "p"}, []string{pd.ID}},
		{memory.ProjectRef{Tenant: "c", Project: "p"}, nil},
	} {
		got, err := e.s.StandingInstructions(e.ctx, tc.ref, 0)
		e.ok(err, "StandingInstructions")
		e.sameSet("standing of "+tc.ref.String(), nodeIDs(got), tc.want)
	}
}

// testTenantGraph: no edge, supersede or revision ties two tenants, and
// a walk stays in the filter's tenant.
func testTenantGraph(e *env) {
	a1 := e.upsert(tnode("a", "p", memory.Decision, "use postgres"))
	a2 := e.upsert(tnode("a", "p", memory.Decision, "use sqlite"))
	b1 := e.upsert(tnode("b", "p", memory.Decision, "use redis"))
	_, err := e.s.Link(e.ctx, memory.Edge{Src: a1.ID, Dst: b1.ID, Relation: memory.RelatesTo})
	e.is(err, memory.ErrInvalid, "Link across tenants")
	e.is(e.s.Supersede(e.ctx, b1.ID, a1.ID), memory.ErrInvalid, "Supersede across tenants")
	if e.get(b1.ID).SupersededBy != "" {
		e.t.Fatal("a refused supersede closed the node")
	}
	rev, err := e.s.Revise(e.ctx, a1.ID, memory.Node{TenantID: "b", Label: "use postgres 17"})
	e.ok(err, "Revise")
	if rev.TenantID != "a" {
		e.t.Fatalf("a revision stays in its tenant: %q", rev.TenantID)
	}
	_, err = e.s.Link(e.ctx, memory.Edge{Src: a2.ID, Dst: rev.ID, Relation: memory.RelatesTo})
	e.ok(err, "Link within the tenant")
	for _, id := range []string{a1.ID, a2.ID, rev.ID} {
		es, err := e.s.Edges(e.ctx, id)
		e.ok(err, "Edges")
		for _, ed := range es {
			if ed.Src == b1.ID || ed.Dst == b1.ID {
				e.t.Fatalf("an edge reaches tenant b: %+v", ed)
			}
		}
	}
	nb, err := e.s.Neighbours(e.ctx, a2.ID, 3, memory.Filter{TenantID: "b", ProjectID: "p", IncludeSuperseded: true})
	e.ok(err, "Neighbours under another tenant's filter")
	if len(nb) != 0 {
		e.t.Fatalf("a walk under tenant b's filter returned tenant a's nodes: %v", nb)
	}
	nb, err = e.s.Neighbours(e.ctx, a2.ID, 3, memory.Filter{TenantID: "a", ProjectID: "p", IncludeSuperseded: true})
	e.ok(err, "Neighbours")
	if len(nb) == 0 {
		e.t.Fatal("a walk within the tenant found nothing")
	}
}

// testTenantBatch: a batch cannot move an id into another tenant nor link
// two tenants; it writes each node into its own tenant.
func testTenantBatch(e *env) {
	now := e.c.Now()
	a := tnode("a", "p", memory.Observation, "the office is in jakarta")
	a.ID, a.CreatedAt = "bat-a", now
	b := tnode("b", "p", memory.Observation, "the office is in jakarta")
	b.ID = "bat-b"
	e.ok(e.s.PutBatch(e.ctx, []memory.Node{a, b}, nil), "PutBatch of two tenants' nodes")
	if e.get("bat-a").TenantID != "a" || e.get("bat-b").TenantID != "b" {
		e.t.Fatal("PutBatch lost a node's tenant")
	}
	moved := b
	moved.ID, moved.TenantID = "bat-a", "b"
	e.is(e.s.PutBatch(e.ctx, []memory.Node{moved}, nil), memory.ErrInvalid, "PutBatch moving an id to another tenant")
	if got := e.get("bat-a"); got.TenantID != "a" {
		e.t.Fatalf("the refused batch moved the node: %+v", got)
	}
	e.is(e.s.PutBatch(e.ctx, nil, []memory.Edge{{Src: "bat-a", Dst: "bat-b", Relation: memory.RelatesTo}}),
		memory.ErrInvalid, "PutBatch edge across tenants")
	c := tnode("c", "p", memory.Observation, "a third tenant")
	c.ID = "bat-c"
	e.is(e.s.PutBatch(e.ctx, []memory.Node{c}, []memory.Edge{{Src: "bat-c", Dst: "bat-a", Relation: memory.RelatesTo}}),
		memory.ErrInvalid, "PutBatch edge from a new node to another tenant's")
	if _, err := e.s.Get(e.ctx, "bat-c"); !memory.IsNotFound(err) {
		e.t.Fatalf("the refused batch wrote its node: %v", err)
	}
	es, err := e.s.Edges(e.ctx, "bat-a")
	e.ok(err, "Edges")
	if len(es) != 0 {
		e.t.Fatalf("a refused batch wrote an edge: %v", es)
	}
}

// testTenantSessions: the same project and session ids of two tenants are
// two sessions in every record.
func testTenantSessions(e *env) {
	ra := memory.SessionRef{Tenant: "a", Project: "p", Session: "s"}
	rb := memory.SessionRef{Tenant: "b", Project: "p", Session: "s"}
	rd := memory.SessionRef{Project: "p", Session: "s"}
	msgs := func(text string) []memory.Message {
		return []memory.Message{{Role: memory.RoleUser, Content: text}}
	}
	_, fresh, err := e.s.AppendTranscript(e.ctx, ra, "t1", msgs("a's words"))
	e.ok(err, "AppendTranscript a")
	_, freshB, err := e.s.AppendTranscript(e.ctx, rb, "t1", msgs("b's words"))
	e.ok(err, "AppendTranscript b")
	if !fresh || !freshB {
		e.t.Fatal("the same turn id in another tenant is a new turn")
	}
	for ref, want := range map[memory.SessionRef]string{ra: "a's words", rb: "b's words"} {
		got, err := e.s.Messages(e.ctx, ref, 0, 0)
		e.ok(err, "Messages")
		if len(got) != 1 || got[0].Content != want || got[0].ID != 1 {
			e.t.Fatalf("Messages of %s: %+v", ref, got)
		}
	}
	if got, err := e.s.Messages(e.ctx, rd, 0, 0); err != nil || len(got) != 0 {
		e.t.Fatalf("the default tenant's session holds another tenant's messages: %v %v", got, err)
	}
	e.ok(e.s.SaveSummary(e.ctx, ra, memory.Summary{Content: "a's summary", UpTo: 1}), "SaveSummary")
	_, err = e.s.LatestSummary(e.ctx, rb)
	e.is(err, memory.ErrNotFound, "LatestSummary of tenant b")
	_, err = e.s.AdvanceCursor(e.ctx, ra, 1)
	e.ok(err, "AdvanceCursor")
	if c, err := e.s.Cursor(e.ctx, rb); err != nil || c != 0 {
		e.t.Fatalf("Cursor of tenant b: %d %v", c, err)
	}
	e.ok(e.s.SetCursor(e.ctx, rb, 5), "SetCursor of tenant b")
	if c, err := e.s.Cursor(e.ctx, ra); err != nil || c != 1 {
		e.t.Fatalf("Cursor of tenant a after tenant b's SetCursor: %d %v", c, err)
	}
	e.ok(e.s.PutInjection(e.ctx, ra, "t1", memory.Injection{IDs: []string{"x"}}, time.Hour), "PutInjection")
	_, err = e.s.GetInjection(e.ctx, rb, "t1")
	e.is(err, memory.ErrNotFound, "GetInjection of tenant b")
	_, err = e.s.TakeInjection(e.ctx, rb, "t1")
	e.is(err, memory.ErrNotFound, "TakeInjection of tenant b")
	if got, err := e.s.TakeInjection(e.ctx, ra, "t1"); err != nil || !slices.Equal(got.IDs, []string{"x"}) {
		e.t.Fatalf("TakeInjection of tenant a: %v %v", got, err)
	}
	first, err := e.s.BriefOnce(e.ctx, ra, time.Hour)
	e.ok(err, "BriefOnce a")
	firstB, err := e.s.BriefOnce(e.ctx, rb, time.Hour)
	e.ok(err, "BriefOnce b")
	if !first || !firstB {
		e.t.Fatal("the briefing flag of one tenant's session is set for another's")
	}
	ok, err := e.s.AcquireLease(e.ctx, ra, "extract", "owner-a", time.Minute)
	e.ok(err, "AcquireLease a")
	okB, err := e.s.AcquireLease(e.ctx, rb, "extract", "owner-b", time.Minute)
	e.ok(err, "AcquireLease b")
	if !ok || !okB {
		e.t.Fatal("a lease of one tenant's session blocks another tenant's")
	}
	pa, pb := ra.ProjectRef(), rb.ProjectRef()
	e.ok(e.s.MarkEventProcessed(e.ctx, pa, "extractor", "ev1", time.Hour), "MarkEventProcessed")
	if done, err := e.s.EventProcessed(e.ctx, pb, "extractor", "ev1"); err != nil || done {
		e.t.Fatalf("a processed record of tenant a answers for tenant b: %v %v", done, err)
	}
	if done, err := e.s.EventProcessed(e.ctx, pa, "extractor", "ev1"); err != nil || !done {
		e.t.Fatalf("EventProcessed of tenant a: %v %v", done, err)
	}
}

// testTenantJournal: a pass is found only within its tenant.
func testTenantJournal(e *env) {
	now := e.c.Now()
	e.ok(e.s.PutPass(e.ctx, memory.Pass{ID: "pass-a", Tenant: "a", Project: "p", Session: "s", Status: memory.PassFinished,
		StartedAt: now, UpdatedAt: now}), "PutPass a")
	e.ok(e.s.PutPass(e.ctx, memory.Pass{ID: "pass-d", Project: "p", Session: "s", Status: memory.PassFinished,
		StartedAt: now, UpdatedAt: now}), "PutPass default")
	for _, ref := range []memory.ProjectRef{{Tenant: "b", Project: "p"}, {Tenant: "b"}, {Project: "p"}, {}} {
		_, err := e.s.GetPass(e.ctx, ref, "pass-a")
		e.is(err, memory.ErrNotFound, "GetPass of tenant a's pass from "+ref.String())
	}
	for _, ref := range []memory.ProjectRef{{Tenant: "a", Project: "p"}, {Tenant: "a"}} {
		got, err := e.s.GetPass(e.ctx, ref, "pass-a")
		e.ok(err, "GetPass")
		if got.Tenant != "a" {
			e.t.Fatalf("GetPass: tenant %q", got.Tenant)
		}
	}
	for _, tc := range []struct {
		q    memory.PassQuery
		want []string
	}{
		{memory.PassQuery{Tenant: "a"}, []string{"pass-a"}},
		{memory.PassQuery{Tenant: "a", Project: "p", Session: "s"}, []string{"pass-a"}},
		{memory.PassQuery{}, []string{"pass-d"}},
		{memory.PassQuery{Tenant: "b"}, nil},
	} {
		got, err := e.s.Passes(e.ctx, tc.q)
		e.ok(err, "Passes")
		var idsOf []string
		for _, p := range got {
			idsOf = append(idsOf, p.ID)
		}
		e.sameSet("Passes of tenant "+tc.q.Tenant, idsOf, tc.want)
	}
}

// testTenantInvalid: a tenant id that is not valid UTF-8 or too long is
// refused before anything is written.
func testTenantInvalid(e *env) {
	for _, t := range []string{"tenant-\xff", string(make([]byte, memory.MaxTenantLen+1))} {
		_, err := e.s.Upsert(e.ctx, tnode(t, "p", memory.Decision, "x"))
		e.is(err, memory.ErrInvalid, "Upsert with a bad tenant")
		_, _, err = e.s.AppendTranscript(e.ctx, memory.SessionRef{Tenant: t, Project: "p", Session: "s"}, "t1",
			[]memory.Message{{Role: memory.RoleUser, Content: "hi"}})
		e.is(err, memory.ErrInvalid, "AppendTranscript with a bad tenant")
	}
	_, err := e.s.Upsert(e.ctx, node("p-\xff", memory.Decision, "x"))
	e.is(err, memory.ErrInvalid, "Upsert with a project id that is not UTF-8")
}
