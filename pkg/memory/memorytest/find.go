package memorytest

import (
	"fmt"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// findTests check memory.Finder where the store has it (both backends
// do; a store without it skips them).
var findTests = []subtest{
	{"Find/PagesNewestFirstThroughKeep", func(e *env) {
		f, ok := e.s.(memory.Finder)
		if !ok {
			e.t.Skip("the store has no memory.Finder")
		}
		var user []string // the user's, oldest first
		for i := range 9 {
			n := node("shop", memory.Decision, fmt.Sprintf("decision number %d", i))
			if i%3 == 0 {
				n.AssertedBy, n.Source = memory.AssertedUser, memory.SourceUser
			}
			got := e.upsert(n)
			if i%3 == 0 {
				user = append(user, got.ID)
			}
			e.c.Advance(time.Second)
		}
		fn := node("shop", memory.Decision, "a forgotten decision")
		fn.AssertedBy = memory.AssertedUser
		forgotten := e.upsert(fn)
		e.ok(e.s.Archive(e.ctx, forgotten.ID), "Archive")
		other := node("shop", memory.Decision, "another tenant's decision")
		other.TenantID, other.AssertedBy = "acme", memory.AssertedUser
		e.upsert(other)
		byUser := func(n *memory.Node) bool { return n.AssertedBy == memory.AssertedUser }
		var got []string
		for off := 0; ; off += 2 {
			page, more, err := f.Find(e.ctx, memory.TimelineQuery{Filter: memory.Filter{ProjectID: "shop"}, Limit: 2}, byUser, off)
			e.ok(err, "Find")
			got = append(got, nodeIDs(page)...)
			if !more {
				break
			}
			if off > 10 {
				e.t.Fatal("Find never says there is no more")
			}
		}
		e.sameList("the user's live decisions, newest first (not the forgotten one, not another tenant's)", got,
			[]string{user[2], user[1], user[0]})
		all, more, err := f.Find(e.ctx, memory.TimelineQuery{Filter: memory.Filter{ProjectID: "shop", IncludeArchived: true}, Limit: 5}, byUser, 0)
		e.ok(err, "Find with the archived")
		if more || len(all) != 4 || all[0].ID != forgotten.ID {
			e.t.Fatalf("with the archived: %v (more %v), want the forgotten one first of 4", nodeIDs(all), more)
		}
		if page, more, err := f.Find(e.ctx, memory.TimelineQuery{Filter: memory.Filter{ProjectID: "shop"}, Limit: 2}, byUser, 3); err != nil || len(page) != 0 || more {
			e.t.Fatalf("past the end: %v %v %v", nodeIDs(page), more, err)
		}
	}},
}
