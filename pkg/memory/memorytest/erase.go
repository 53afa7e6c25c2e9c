package memorytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// eraseTests hold the erasure contract (memory.Erasure): a session, a
// project and a tenant are erased with every kind of record, counted
// exactly; what other sessions keep of an erased memory goes; nothing
// else (another tenant using the same ids above all) changes.
var eraseTests = []subtest{
	{"Erase/Session", func(e *env) { testErase(e, memory.EraseScope{Tenant: "t", Project: "P", Session: "S1"}) }},
	{"Erase/Project", func(e *env) { testErase(e, memory.EraseScope{Tenant: "t", Project: "P"}) }},
	{"Erase/Tenant", func(e *env) { testErase(e, memory.EraseScope{Tenant: "t"}) }},
	{"Erase/DefaultTenantProject", func(e *env) { testErase(e, memory.EraseScope{Tenant: "", Project: "P"}) }},
	{"Erase/Invalid", testEraseInvalid},
	{"Erase/SessionIDsAndSummaries", testSessionIDs},
	{"Erase/Purge", func(e *env) {
		w := seedErase(e, []string{"t"})
		_, err := e.s.Erase(e.ctx, memory.EraseScope{Tenant: "t", Project: "P"}, nil)
		e.ok(err, "Erase")
		rep, err := e.s.Purge(e.ctx)
		e.ok(err, "Purge")
		if len(rep.Done)+len(rep.Incomplete) == 0 {
			e.t.Fatal("Purge reported nothing")
		}
		w.checkKept(e, memory.EraseScope{Tenant: "t", Project: "P"})
	}},
}

// The erasure world: tenants ("t", "u", or "" the default tenant) that
// use the same project ids P and Q and session ids S1 and S2. In every
// session: a user's preference A (a standing instruction, with a vector
// and a path) and a session-scoped observation B, a two-message turn, a
// summary, the cursor, an injection record naming A, the briefing flag,
// a lease, a processed-event record and a pass journal remembering A.
// Edges: A -relates_to-> B in every session, A(S2) -relates_to-> A(S1)
// in every project, a closed A(P,S1) -caused_by-> B(P,S1), the tenant's
// global memory G -about-> A(P,S1), and A(Q,S1) -relates_to-> A(P,S1).
// A(P,S1) is named besides by the injection records of (P,S2) and
// (Q,S1) and by an entry of their passes.
var (
	eraseProjects = []string{"P", "Q"}
	eraseSessions = []string{"S1", "S2"}
)

type eraseWorld struct {
	tenants []string
	a, b    map[memory.SessionRef]memory.Node
	g       map[string]memory.Node // by tenant
}

func eraseText(ref memory.SessionRef, what string) string {
	return fmt.Sprintf("%s of tenant %s project %s session %s", what, ref.Tenant, ref.Project, ref.Session)
}

func eraseVec(i int) []float32 {
	v := make([]float32, 8)
	v[i%8] = 1
	v[(i+3)%8] = 0.5
	v[(i+5)%8] = float32(i%7) * 0.1
	return v
}

func seedErase(e *env, tenants []string) *eraseWorld {
	e.t.Helper()
	w := &eraseWorld{tenants: tenants, a: map[memory.SessionRef]memory.Node{}, b: map[memory.SessionRef]memory.Node{}, g: map[string]memory.Node{}}
	vi := 0
	vec := func(id string) {
		vi++
		e.ok(e.s.SetEmbedding(e.ctx, id, "m", eraseVec(vi)), "SetEmbedding")
	}
	for _, t := range tenants {
		for _, p := range eraseProjects {
			for _, s := range eraseSessions {
				ref := memory.SessionRef{Tenant: t, Project: p, Session: s}
				a := e.upsert(memory.Node{TenantID: t, ProjectID: p, SessionID: s, Subkind: memory.Preference, Scope: memory.ScopeProject,
					Source: memory.SourceUser, AssertedBy: memory.AssertedUser, Label: eraseText(ref, "preference"),
					Body: "zebrafish " + strings.ToLower(t+p+s) + " body", Paths: []string{"src/" + t + p + s + ".go"}})
				vec(a.ID)
				b := e.upsert(memory.Node{TenantID: t, ProjectID: p, SessionID: s, Subkind: memory.Observation, Scope: memory.ScopeSession,
					Label: eraseText(ref, "observation")})
				w.a[ref], w.b[ref] = e.get(a.ID), b
				e.link(a.ID, b.ID, memory.RelatesTo)
				_, _, err := e.s.AppendTranscript(e.ctx, ref, "t1", []memory.Message{
					{Role: memory.RoleUser, Content: eraseText(ref, "the user said")},
					{Role: memory.RoleAssistant, Content: eraseText(ref, "the assistant answered"),
						ToolCalls: []memory.ToolCall{{Name: "look", Arguments: `{"q":"` + eraseText(ref, "tool argument") + `"}`}}},
				})
				e.ok(err, "AppendTranscript")
				e.ok(e.s.SaveSummary(e.ctx, ref, memory.Summary{Content: eraseText(ref, "summary"), UpTo: 2}), "SaveSummary")
				_, err = e.s.AdvanceCursor(e.ctx, ref, 1)
				e.ok(err, "AdvanceCursor")
				took, err := e.s.BriefOnce(e.ctx, ref, time.Hour)
				e.ok(err, "BriefOnce")
				if !took {
					e.t.Fatal("BriefOnce of a fresh session did not take the flag")
				}
				ok, err := e.s.AcquireLease(e.ctx, ref, "extract", "owner-1", time.Hour)
				e.ok(err, "AcquireLease")
				if !ok {
					e.t.Fatal("AcquireLease of a fresh session failed")
				}
				e.ok(e.s.MarkEventProcessed(e.ctx, ref.ProjectRef(), "extractor", "ev-"+s, 0), "MarkEventProcessed")
			}
			for _, s := range eraseSessions {
				ref := memory.SessionRef{Tenant: t, Project: p, Session: s}
				if s == "S2" {
					e.link(w.a[ref].ID, w.a[memory.SessionRef{Tenant: t, Project: p, Session: "S1"}].ID, memory.RelatesTo)
				}
			}
		}
		g := e.upsert(memory.Node{TenantID: t, Subkind: memory.Decision, Scope: memory.ScopeGlobal, Label: "global decision of tenant " + t})
		vec(g.ID)
		w.g[t] = g
		a1 := w.a[memory.SessionRef{Tenant: t, Project: "P", Session: "S1"}]
		b1 := w.b[memory.SessionRef{Tenant: t, Project: "P", Session: "S1"}]
		e.link(g.ID, a1.ID, memory.About)
		e.link(w.a[memory.SessionRef{Tenant: t, Project: "Q", Session: "S1"}].ID, a1.ID, memory.RelatesTo)
		e.link(a1.ID, b1.ID, memory.CausedBy)
		e.ok(e.s.Unlink(e.ctx, a1.ID, b1.ID, memory.CausedBy), "Unlink")
		for _, p := range eraseProjects {
			for _, s := range eraseSessions {
				ref := memory.SessionRef{Tenant: t, Project: p, Session: s}
				a := w.a[ref]
				in := memory.Injection{IDs: []string{a.ID}, Text: eraseText(ref, "the injected block")}
				pass := memory.Pass{ID: "pass-" + p + "-" + s, Tenant: t, Project: p, Session: s, Status: memory.PassFinished,
					StartedAt: e.c.Now(), UpdatedAt: e.c.Now(), State: json.RawMessage(`{"steps":[{"summary":"recalled"}]}`),
					Entries: []memory.JournalEntry{{Op: memory.OpRemember, NodeID: a.ID, After: &a, Reason: eraseText(ref, "the reason"), At: e.c.Now()}}}
				if (p == "P" && s == "S2") || (p == "Q" && s == "S1") {
					in.IDs = append(in.IDs, a1.ID)
					edge := memory.Edge{Src: a.ID, Dst: a1.ID, Relation: memory.RelatesTo}
					pass.Entries = append(pass.Entries, memory.JournalEntry{Op: memory.OpLink, NodeID: a.ID, Edge: &edge, At: e.c.Now()})
				}
				e.ok(e.s.PutInjection(e.ctx, ref, "t1", in, 0), "PutInjection")
				e.ok(e.s.PutPass(e.ctx, pass), "PutPass")
			}
		}
	}
	return w
}

func (e *env) link(src, dst string, rel memory.Relation) {
	e.t.Helper()
	_, err := e.s.Link(e.ctx, memory.Edge{Src: src, Dst: dst, Relation: rel})
	e.ok(err, "Link")
}

// wantErased is what erasing sc from the world deletes.
func wantErased(sc memory.EraseScope) memory.Erased {
	switch sc.Kind() {
	case "session":
		return memory.Erased{Memories: 2, Vectors: 1, Edges: 5, Messages: 2, Turns: 1, Summaries: 1, Cursors: 1,
			Injections: 3, Briefings: 1, Leases: 1, Processed: 0, Passes: 1, JournalEntries: 2}
	case "project":
		return memory.Erased{Memories: 4, Vectors: 2, Edges: 6, Messages: 4, Turns: 2, Summaries: 2, Cursors: 2,
			Injections: 3, Briefings: 2, Leases: 2, Processed: 2, Passes: 2, JournalEntries: 1}
	}
	return memory.Erased{Memories: 9, Vectors: 5, Edges: 9, Messages: 8, Turns: 4, Summaries: 4, Cursors: 4,
		Injections: 4, Briefings: 4, Leases: 4, Processed: 4, Passes: 4, JournalEntries: 0}
}

func testErase(e *env, sc memory.EraseScope) {
	other := "u"
	if sc.Tenant == "u" {
		other = "t"
	}
	w := seedErase(e, []string{sc.Tenant, other})
	var seen []string
	got, err := e.s.Erase(e.ctx, sc, func(t string) { seen = append(seen, t) })
	e.ok(err, "Erase "+sc.String())
	if want := wantErased(sc); got != want {
		e.t.Fatalf("Erase %s counted\n %+v, want\n %+v", sc, got, want)
	}
	// What the erasure deleted it named to Seen.
	for ref, a := range w.a {
		if !sc.HoldsSession(ref) {
			continue
		}
		for _, text := range []string{a.ID, a.Label, w.b[ref].Label, eraseText(ref, "the user said"), eraseText(ref, "summary"),
			eraseText(ref, "the injected block"), eraseText(ref, "the reason")} {
			if !slices.Contains(seen, text) {
				e.t.Fatalf("Seen did not get %q", text)
			}
		}
	}
	w.checkKept(e, sc)
	// Again: nothing left to erase.
	again, err := e.s.Erase(e.ctx, sc, nil)
	e.ok(err, "Erase again")
	if again != (memory.Erased{}) {
		e.t.Fatalf("a second erasure of %s counted %+v", sc, again)
	}
	w.checkKept(e, sc)
	w.checkErased(e, sc) // last: it probes leases and briefing flags, which writes them
}

// erasedNode reports whether the world's node n is the scope's.
func (w *eraseWorld) erasedNode(sc memory.EraseScope, n memory.Node) bool { return sc.HoldsNode(&n) }

// checkErased: nothing of the scope is read back by any read of the
// contract.
func (w *eraseWorld) checkErased(e *env, sc memory.EraseScope) {
	e.t.Helper()
	if sc.Project != "" {
		sids, err := e.s.SessionIDs(e.ctx, memory.ProjectRef{Tenant: sc.Tenant, Project: sc.Project})
		e.ok(err, "SessionIDs")
		if sc.Session != "" && slices.Contains(sids, sc.Session) || sc.Session == "" && len(sids) > 0 {
			e.t.Fatalf("SessionIDs after erasing %s: %v", sc, sids)
		}
	}
	var gone []memory.Node
	for ref := range w.a {
		for _, n := range []memory.Node{w.a[ref], w.b[ref]} {
			if w.erasedNode(sc, n) {
				gone = append(gone, n)
			}
		}
	}
	for _, g := range w.g {
		if w.erasedNode(sc, g) {
			gone = append(gone, g)
		}
	}
	for _, n := range gone {
		if _, err := e.s.Get(e.ctx, n.ID); !errors.Is(err, memory.ErrNotFound) {
			e.t.Fatalf("Get of erased %s (%s): %v", n.ID, n.Label, err)
		}
		f := memory.Filter{TenantID: n.TenantID, ProjectID: n.ProjectID, SessionID: n.SessionID, IncludeArchived: true, IncludeSuperseded: true}
		hits, err := e.s.Lexical(e.ctx, memory.Terms(n.Label), f, 100)
		e.ok(err, "Lexical")
		if slices.ContainsFunc(hits, func(h memory.Scored) bool { return h.ID == n.ID }) {
			e.t.Fatalf("Lexical still finds erased %s", n.Label)
		}
		if len(n.Paths) > 0 {
			hits, err := e.s.ByPaths(e.ctx, n.Paths, f, 100)
			e.ok(err, "ByPaths")
			if len(hits) > 0 {
				e.t.Fatalf("ByPaths still finds %v after erasing %s", hits, n.Label)
			}
		}
		edges, err := e.s.Edges(e.ctx, n.ID)
		e.ok(err, "Edges")
		if len(edges) > 0 {
			e.t.Fatalf("erased %s still has edges %v", n.ID, edges)
		}
	}
	if n, err := e.s.GetMany(e.ctx, nodeIDs(gone)); err != nil || len(n) > 0 {
		e.t.Fatalf("GetMany of erased nodes: %d, %v", len(n), err)
	}
	for i := 1; i <= 40; i++ {
		for _, t := range w.tenants {
			hits, err := e.s.Vector(e.ctx, "m", eraseVec(i), memory.Filter{TenantID: t, ProjectID: "P", SessionID: "S1", CrossProject: true, IncludeArchived: true}, 100)
			e.ok(err, "Vector")
			for _, h := range hits {
				if slices.ContainsFunc(gone, func(n memory.Node) bool { return n.ID == h.ID }) {
					e.t.Fatalf("Vector still finds erased %s", h.ID)
				}
			}
		}
	}
	for _, p := range eraseProjects {
		pr := memory.ProjectRef{Tenant: sc.Tenant, Project: p}
		st, err := e.s.StandingInstructions(e.ctx, pr, 0)
		e.ok(err, "StandingInstructions")
		tl, err := e.s.Timeline(e.ctx, memory.TimelineQuery{Filter: memory.Filter{TenantID: sc.Tenant, ProjectID: p, SessionID: "S1", IncludeArchived: true, IncludeSuperseded: true}, Limit: 100})
		e.ok(err, "Timeline")
		for _, n := range slices.Concat(st, tl) {
			if w.erasedNode(sc, n) {
				e.t.Fatalf("a read of project %s still returns erased %s", p, n.Label)
			}
		}
		for _, s := range eraseSessions {
			ref := memory.SessionRef{Tenant: sc.Tenant, Project: p, Session: s}
			if !sc.HoldsSession(ref) {
				continue
			}
			if m, err := e.s.Messages(e.ctx, ref, 0, 0); err != nil || len(m) > 0 {
				e.t.Fatalf("Messages of erased %s: %v %v", ref, m, err)
			}
			if sums, err := e.s.Summaries(e.ctx, ref); err != nil || len(sums) > 0 {
				e.t.Fatalf("Summaries of erased %s: %v %v", ref, sums, err)
			}
			if _, err := e.s.LatestSummary(e.ctx, ref); !errors.Is(err, memory.ErrNotFound) {
				e.t.Fatalf("LatestSummary of erased %s: %v", ref, err)
			}
			if c, err := e.s.Cursor(e.ctx, ref); err != nil || c != 0 {
				e.t.Fatalf("Cursor of erased %s: %d %v", ref, c, err)
			}
			if _, err := e.s.GetInjection(e.ctx, ref, "t1"); !errors.Is(err, memory.ErrNotFound) {
				e.t.Fatalf("GetInjection of erased %s: %v", ref, err)
			}
			if ok, err := e.s.AcquireLease(e.ctx, ref, "extract", "owner-2", time.Hour); err != nil || !ok {
				e.t.Fatalf("the lease of erased %s is still held: %v %v", ref, ok, err)
			}
			if took, err := e.s.BriefOnce(e.ctx, ref, time.Hour); err != nil || !took {
				e.t.Fatalf("the briefing flag of erased %s is still taken: %v %v", ref, took, err)
			}
			passes, err := e.s.Passes(e.ctx, memory.PassQuery{Tenant: sc.Tenant, Project: p, Session: s})
			e.ok(err, "Passes")
			if len(passes) > 0 {
				e.t.Fatalf("erased %s still has passes %v", ref, passes)
			}
		}
		if sc.Session == "" && (sc.Project == "" || sc.Project == p) {
			if done, err := e.s.EventProcessed(e.ctx, pr, "extractor", "ev-S1"); err != nil || done {
				e.t.Fatalf("the processed-event record of erased %s stays: %v %v", pr, done, err)
			}
		}
	}
}

// checkKept: everything the scope does not hold is as it was written,
// but for what named an erased memory.
func (w *eraseWorld) checkKept(e *env, sc memory.EraseScope) {
	e.t.Helper()
	goneIDs := map[string]bool{}
	for ref := range w.a {
		for _, n := range []memory.Node{w.a[ref], w.b[ref]} {
			if w.erasedNode(sc, n) {
				goneIDs[n.ID] = true
			}
		}
	}
	for t, g := range w.g {
		if w.erasedNode(sc, g) {
			continue
		}
		got := e.get(g.ID)
		if got.Label != g.Label || got.TenantID != t {
			e.t.Fatalf("kept global %s changed: %+v", g.ID, got)
		}
	}
	for ref, a := range w.a {
		if sc.HoldsSession(ref) {
			continue
		}
		for _, n := range []memory.Node{a, w.b[ref]} {
			if w.erasedNode(sc, n) {
				continue
			}
			got := e.get(n.ID)
			if got.Label != n.Label || got.Body != n.Body {
				e.t.Fatalf("kept %s changed: %+v", n.Label, got)
			}
			edges, err := e.s.Edges(e.ctx, n.ID)
			e.ok(err, "Edges")
			for _, ed := range edges {
				if goneIDs[ed.Src] || goneIDs[ed.Dst] {
					e.t.Fatalf("kept %s keeps an edge to an erased memory: %+v", n.Label, ed)
				}
			}
		}
		f := memory.Filter{TenantID: ref.Tenant, ProjectID: ref.Project, SessionID: ref.Session}
		hits, err := e.s.Lexical(e.ctx, memory.Terms(a.Label), f, 100)
		e.ok(err, "Lexical")
		if !slices.ContainsFunc(hits, func(h memory.Scored) bool { return h.ID == a.ID }) {
			e.t.Fatalf("Lexical no longer finds kept %s", a.Label)
		}
		hits, err = e.s.ByPaths(e.ctx, a.Paths, f, 100)
		e.ok(err, "ByPaths")
		if len(hits) != 1 || hits[0].ID != a.ID {
			e.t.Fatalf("ByPaths of kept %s: %v", a.Label, hits)
		}
		m, err := e.s.Messages(e.ctx, ref, 0, 0)
		e.ok(err, "Messages")
		if len(m) != 2 || m[0].Content != eraseText(ref, "the user said") {
			e.t.Fatalf("kept transcript of %s: %+v", ref, m)
		}
		if sum, err := e.s.LatestSummary(e.ctx, ref); err != nil || sum.Content != eraseText(ref, "summary") {
			e.t.Fatalf("kept summary of %s: %+v %v", ref, sum, err)
		}
		if c, err := e.s.Cursor(e.ctx, ref); err != nil || c != 1 {
			e.t.Fatalf("kept cursor of %s: %d %v", ref, c, err)
		}
		if took, err := e.s.BriefOnce(e.ctx, ref, time.Hour); err != nil || took {
			e.t.Fatalf("the kept briefing flag of %s was cleared: %v %v", ref, took, err)
		}
		if ok, err := e.s.AcquireLease(e.ctx, ref, "extract", "owner-2", time.Hour); err != nil || ok {
			e.t.Fatalf("the kept lease of %s was released: %v %v", ref, ok, err)
		}
		if done, err := e.s.EventProcessed(e.ctx, ref.ProjectRef(), "extractor", "ev-"+ref.Session); err != nil || !done {
			e.t.Fatalf("the kept processed-event record of %s: %v %v", ref, done, err)
		}
		in, err := e.s.GetInjection(e.ctx, ref, "t1")
		named := slices.ContainsFunc(in.IDs, func(id string) bool { return goneIDs[id] })
		switch {
		case err == nil && named:
			e.t.Fatalf("the injection record of %s still names an erased memory: %v", ref, in.IDs)
		case errors.Is(err, memory.ErrNotFound):
			a1 := w.a[memory.SessionRef{Tenant: ref.Tenant, Project: "P", Session: "S1"}]
			if !goneIDs[a1.ID] || !((ref.Project == "P" && ref.Session == "S2") || (ref.Project == "Q" && ref.Session == "S1")) {
				e.t.Fatalf("the injection record of %s, which named no erased memory, is gone", ref)
			}
		case err != nil:
			e.t.Fatalf("GetInjection of %s: %v", ref, err)
		}
		pass, err := e.s.GetPass(e.ctx, ref.ProjectRef(), "pass-"+ref.Project+"-"+ref.Session)
		e.ok(err, "GetPass of a kept session")
		for _, en := range pass.Entries {
			if goneIDs[en.NodeID] || en.Edge != nil && (goneIDs[en.Edge.Src] || goneIDs[en.Edge.Dst]) {
				e.t.Fatalf("the journal of %s still holds an erased memory: %+v", ref, en)
			}
		}
		if len(pass.Entries) == 0 || pass.Entries[0].NodeID != a.ID {
			e.t.Fatalf("the journal of %s lost its own entry: %+v", ref, pass.Entries)
		}
		if len(pass.Entries) == 1 && pass.State != nil && slices.ContainsFunc([]string{"P/S2", "Q/S1"}, func(k string) bool { return k == ref.Project+"/"+ref.Session }) {
			e.t.Fatalf("a scrubbed journal of %s kept its state", ref)
		}
	}
	for _, t := range w.tenants {
		if t == sc.Tenant && sc.Project == "" {
			continue
		}
		for _, p := range eraseProjects {
			if t == sc.Tenant && p == sc.Project && sc.Session == "" {
				continue
			}
			sids, err := e.s.SessionIDs(e.ctx, memory.ProjectRef{Tenant: t, Project: p})
			e.ok(err, "SessionIDs")
			want := eraseSessions
			if t == sc.Tenant && p == sc.Project {
				want = slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == sc.Session })
			}
			if !slices.Equal(sids, want) {
				e.t.Fatalf("SessionIDs of %s/%s: %v, want %v", t, p, sids, want)
			}
		}
	}
}

func testEraseInvalid(e *env) {
	for _, sc := range []memory.EraseScope{
		{},                             // the whole default tenant
		{Tenant: "t", Session: "s"},    // a session without its project
		{Tenant: "", Session: "s"},     // both
		{Tenant: "t", Project: "\xff"}, // not UTF-8
	} {
		_, err := e.s.Erase(e.ctx, sc, nil)
		e.is(err, memory.ErrInvalid, fmt.Sprintf("Erase %+v", sc))
	}
	// An unknown scope erases nothing, and is no error.
	got, err := e.s.Erase(e.ctx, memory.EraseScope{Tenant: "nobody", Project: "nothing", Session: "never"}, nil)
	e.ok(err, "Erase of an unknown scope")
	if got != (memory.Erased{}) {
		e.t.Fatalf("an unknown scope counted %+v", got)
	}
	_, err = e.s.AcquireLease(e.ctx, memory.SessionRef{Project: "p", Session: "s"}, "a:b", "o", time.Minute)
	e.is(err, memory.ErrInvalid, "a lease name with a colon")
	_, err = e.s.AcquireLease(e.ctx, memory.SessionRef{Project: "p", Session: "s"}, "m", "o", time.Minute)
	e.is(err, memory.ErrInvalid, "a lease named like a session's key")
}

// testSessionIDs: every kind of per-session record names its session,
// session ids with the key separator too; Summaries lists every summary.
func testSessionIDs(e *env) {
	p := memory.ProjectRef{Tenant: "t", Project: "p"}
	ref := func(s string) memory.SessionRef { return memory.SessionRef{Tenant: "t", Project: "p", Session: s} }
	_, _, err := e.s.AppendTranscript(e.ctx, ref("a"), "t", []memory.Message{{Role: memory.RoleUser, Content: "hi"}})
	e.ok(err, "AppendTranscript")
	e.ok(e.s.SaveSummary(e.ctx, ref("b:l"), memory.Summary{Content: "one", UpTo: 1}), "SaveSummary")
	e.ok(e.s.SaveSummary(e.ctx, ref("b:l"), memory.Summary{Content: "two", UpTo: 2}), "SaveSummary")
	_, err = e.s.AdvanceCursor(e.ctx, ref("c:m"), 3)
	e.ok(err, "AdvanceCursor")
	e.ok(e.s.PutInjection(e.ctx, ref("d"), "t", memory.Injection{IDs: []string{}}, 0), "PutInjection")
	_, err = e.s.BriefOnce(e.ctx, ref("e"), time.Hour)
	e.ok(err, "BriefOnce")
	_, err = e.s.AcquireLease(e.ctx, ref("f"), "x", "o", time.Hour)
	e.ok(err, "AcquireLease")
	e.ok(e.s.PutPass(e.ctx, memory.Pass{ID: "g1", Tenant: "t", Project: "p", Session: "g", Status: memory.PassRunning, StartedAt: e.c.Now()}), "PutPass")
	_, err = e.s.BriefOnce(e.ctx, memory.SessionRef{Tenant: "other", Project: "p", Session: "z"}, time.Hour)
	e.ok(err, "BriefOnce of another tenant")
	got, err := e.s.SessionIDs(e.ctx, p)
	e.ok(err, "SessionIDs")
	if want := []string{"a", "b:l", "c:m", "d", "e", "f", "g"}; !slices.Equal(got, want) {
		e.t.Fatalf("SessionIDs: %v, want %v", got, want)
	}
	sums, err := e.s.Summaries(e.ctx, ref("b:l"))
	e.ok(err, "Summaries")
	if len(sums) != 2 || sums[0].Content != "one" || sums[1].Content != "two" {
		e.t.Fatalf("Summaries: %+v", sums)
	}
	// Erasing session "b" leaves session "b:l" alone.
	_, err = e.s.Erase(e.ctx, memory.EraseScope{Tenant: "t", Project: "p", Session: "b"}, nil)
	e.ok(err, "Erase of session b")
	if sums, err := e.s.Summaries(e.ctx, ref("b:l")); err != nil || len(sums) != 2 {
		e.t.Fatalf("erasing session b took session b:l's summaries: %v %v", sums, err)
	}
	_, err = e.s.Erase(e.ctx, memory.EraseScope{Tenant: "t", Project: "p", Session: "c"}, nil)
	e.ok(err, "Erase of session c")
	if c, err := e.s.Cursor(e.ctx, ref("c:m")); err != nil || c != 3 {
		e.t.Fatalf("erasing session c took session c:m's cursor: %d %v", c, err)
	}
}
