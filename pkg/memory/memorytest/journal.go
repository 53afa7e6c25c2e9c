package memorytest

import (
	"encoding/json"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

var journalTests = []subtest{
	{"Journal/PutGetReplace", func(e *env) {
		n := e.upsert(node("p", memory.Preference, "likes tea"))
		p := memory.Pass{ID: "pass1", Project: "p", Session: "s", Status: memory.PassRunning, StartedAt: e.c.Now(),
			UpdatedAt: e.c.Now(), State: json.RawMessage(`{"steps":[{"summary":"x"}]}`),
			Entries: []memory.JournalEntry{{Op: memory.OpRemember, NodeID: n.ID, After: &n, Reason: "stated", At: e.c.Now()}}}
		e.ok(e.s.PutPass(e.ctx, p), "PutPass")
		got, err := e.s.GetPass(e.ctx, memory.ProjectRef{Project: "p"}, "pass1")
		e.ok(err, "GetPass")
		if got.Status != memory.PassRunning || len(got.Entries) != 1 || got.Entries[0].After == nil ||
			got.Entries[0].After.ID != n.ID || got.Entries[0].Reason != "stated" || string(got.State) != string(p.State) {
			e.t.Fatalf("GetPass returned %+v", got)
		}
		p.Status, p.Verdict, p.Steps, p.From, p.UpTo = memory.PassFinished, "done", 3, 41, 60
		e.ok(e.s.PutPass(e.ctx, p), "PutPass again")
		got, err = e.s.GetPass(e.ctx, memory.ProjectRef{Project: ""}, "pass1")
		e.ok(err, "GetPass without project")
		if got.Status != memory.PassFinished || got.Verdict != "done" || got.Steps != 3 || got.From != 41 || got.UpTo != 60 {
			e.t.Fatalf("replaced pass reads %+v", got)
		}
		list, err := e.s.Passes(e.ctx, memory.PassQuery{Project: "p"})
		e.ok(err, "Passes")
		if len(list) != 1 {
			e.t.Fatalf("a replaced pass is listed %d times", len(list))
		}
	}},
	{"Journal/NotFoundAndInvalid", func(e *env) {
		_, err := e.s.GetPass(e.ctx, memory.ProjectRef{Project: "p"}, "nope")
		e.is(err, memory.ErrNotFound, "GetPass of an unknown pass")
		_, err = e.s.GetPass(e.ctx, memory.ProjectRef{Project: ""}, "nope")
		e.is(err, memory.ErrNotFound, "GetPass of an unknown pass in any project")
		for _, bad := range []memory.Pass{
			{Project: "p", Session: "s", Status: memory.PassRunning, StartedAt: e.c.Now()},
			{ID: "x", Session: "s", Status: memory.PassRunning, StartedAt: e.c.Now()},
			{ID: "x", Project: "p", Session: "s", Status: "odd", StartedAt: e.c.Now()},
			{ID: "x", Project: "p", Session: "s", Status: memory.PassRunning},
		} {
			e.is(e.s.PutPass(e.ctx, bad), memory.ErrInvalid, "PutPass of an invalid pass")
		}
	}},
	{"Journal/ListFilters", func(e *env) {
		put := func(id, project, session string, st memory.PassStatus, at time.Duration) {
			e.ok(e.s.PutPass(e.ctx, memory.Pass{ID: id, Project: project, Session: session, Status: st,
				StartedAt: Epoch.Add(at), UpdatedAt: Epoch.Add(at)}), "PutPass "+id)
		}
		put("a1", "p", "s1", memory.PassFinished, time.Minute)
		put("a2", "p", "s1", memory.PassParked, 2*time.Minute)
		put("a3", "p", "s2", memory.PassFinished, 3*time.Minute)
		put("b1", "q", "s1", memory.PassFinished, 4*time.Minute)
		ids := func(q memory.PassQuery) []string {
			e.t.Helper()
			ps, err := e.s.Passes(e.ctx, q)
			e.ok(err, "Passes")
			out := make([]string, len(ps))
			for i, p := range ps {
				out[i] = p.ID
			}
			return out
		}
		e.sameList("project p", ids(memory.PassQuery{Project: "p"}), []string{"a3", "a2", "a1"})
		e.sameList("session s1 of p", ids(memory.PassQuery{Project: "p", Session: "s1"}), []string{"a2", "a1"})
		e.sameList("parked in p", ids(memory.PassQuery{Project: "p", Status: memory.PassParked}), []string{"a2"})
		e.sameList("every project", ids(memory.PassQuery{}), []string{"b1", "a3", "a2", "a1"})
		e.sameList("limit", ids(memory.PassQuery{Project: "p", Limit: 2}), []string{"a3", "a2"})
		e.sameList("unknown project", ids(memory.PassQuery{Project: "zz"}), []string{})
	}},
}
