package memorytest

import (
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

var countTests = []subtest{
	{"Count", testCount},
	{"Restore/Reopens", testRestoreReopens},
}

func testCount(e *env) {
	count := func(project string) memory.Counts {
		e.t.Helper()
		c, err := e.s.Count(e.ctx, memory.ProjectRef{Project: project}, "m")
		e.ok(err, "Count")
		return c
	}
	if c := count("p"); c.Live != 0 || c.Archived != 0 || c.Closed != 0 || c.Pending != 0 || len(c.BySubkind) != 0 {
		e.t.Fatalf("an empty store counts %+v", c)
	}
	d := e.upsert(node("p", memory.Decision, "use postgres"))
	e.ok(e.s.SetEmbedding(e.ctx, d.ID, "m", vec(1, 0)), "SetEmbedding")
	o := e.upsert(node("p", memory.Observation, "the cache is cold on monday"))
	e.ok(e.s.SetEmbedding(e.ctx, o.ID, "other", vec(0, 1)), "SetEmbedding")
	e.upsert(memory.Node{Subkind: memory.Decision, Scope: memory.ScopeSession, ProjectID: "p", SessionID: "s", Label: "try the flag"})
	e.upsert(memory.Node{Subkind: memory.Preference, Scope: memory.ScopeGlobal, Label: "tabs over spaces"})
	gone := e.upsert(node("p", memory.Failure, "the deploy broke"))
	e.ok(e.s.Archive(e.ctx, gone.ID), "Archive")
	old := e.upsert(node("p", memory.Decision, "use mysql"))
	e.c.Advance(time.Second)
	e.ok(e.s.Supersede(e.ctx, old.ID, d.ID), "Supersede")
	e.upsert(node("q", memory.Decision, "another project's decision"))

	c := count("p")
	if c.Live != 4 || c.BySubkind[memory.Decision] != 2 || c.BySubkind[memory.Observation] != 1 || c.BySubkind[memory.Preference] != 1 ||
		c.ByScope[memory.ScopeProject] != 2 || c.ByScope[memory.ScopeSession] != 1 || c.ByScope[memory.ScopeGlobal] != 1 {
		e.t.Fatalf("live counts of p: %+v", c)
	}
	if c.Archived != 1 || c.Closed != 1 {
		e.t.Fatalf("archived %d closed %d, want 1 and 1", c.Archived, c.Closed)
	}
	// Pending: the observation (another model's vector), the session
	// decision and the global preference (no vector); not the archived or
	// superseded ones.
	if c.Pending != 3 {
		e.t.Fatalf("pending %d, want 3", c.Pending)
	}
	if g := count(""); g.Live != 1 || g.ByScope[memory.ScopeGlobal] != 1 || g.Pending != 1 {
		e.t.Fatalf("global counts %+v", g)
	}
	if q := count("q"); q.Live != 2 || q.Archived != 0 {
		e.t.Fatalf("q counts %+v (its decision and the global preference)", q)
	}
}

func testRestoreReopens(e *env) {
	old := e.upsert(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "archive me zebra", Paths: []string{"x.go"}})
	e.ok(e.s.SetEmbedding(e.ctx, old.ID, "m", vec(1, 0)), "SetEmbedding")
	newer := e.upsert(node("p", memory.Decision, "the newer decision"))
	e.c.Advance(time.Second)
	e.ok(e.s.Supersede(e.ctx, old.ID, newer.ID), "Supersede")
	f := memory.Filter{ProjectID: "p"}
	e.channelsSee(f, old.ID, false)
	e.c.Advance(time.Second)
	e.ok(e.s.Restore(e.ctx, old.ID), "Restore")
	n := e.get(old.ID)
	if !n.Live() || n.SupersededBy != "" || !n.ValidTo.IsZero() || !timeEq(n.UpdatedAt, e.c.Now()) {
		e.t.Fatalf("restore did not reopen the superseded node: %+v", n)
	}
	e.channelsSee(f, old.ID, true)
	if c, err := e.s.Count(e.ctx, memory.ProjectRef{Project: "p"}, "m"); err != nil || c.Live != 2 || c.Closed != 0 {
		e.t.Fatalf("counts after restore: %+v, %v", c, err)
	}
	// The revised fact reopens too.
	rev, err := e.s.Revise(e.ctx, newer.ID, memory.Node{Label: "the newest decision"})
	e.ok(err, "Revise")
	e.ok(e.s.Restore(e.ctx, newer.ID), "Restore revised")
	n, r := e.get(newer.ID), e.get(rev.ID)
	if !n.Live() || !r.Live() {
		e.t.Fatalf("revised node not reopened (%+v), or its revision closed (%+v)", n, r)
	}
}
