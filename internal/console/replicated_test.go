package console_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// A held fact the console keeps is a memory created: its id's entry in the
// store's id index is on another server than the pass's journal (a Redis
// Cluster), so a failover could keep the resolution and lose the entry.
// The resolution is written once the store's replicas confirm the memory;
// after a failover it is written again and waited for again; when the
// replicas do not confirm, the request fails, the held fact stays open and
// resolving it again stores no second memory.
// replicatedUnit is a console unit on a store whose writes a failover
// can lose (storetest.LosingWrites), logged in, with the resolution of its
// held fact as action ready to post (resolve).
type replicatedUnit struct {
	*unit
	ls   *storetest.LosingWrites
	held int // the held fact's entry in the seeded pass's journal
	post func() (int, string)
}

func newReplicated(t *testing.T, action string) *replicatedUnit {
	r := &replicatedUnit{}
	r.unit = newUnitWith(t, func(st memory.Store) memory.Store {
		r.ls = &storetest.LosingWrites{Store: st, Lost: storetest.OpenSQLite(t)}
		return r.ls
	})
	c := client(t)
	csrf := r.login(t, c, tokShop)
	r.held = r.heldEntry(t)
	form := url.Values{"csrf": {csrf}, "pass": {r.pass.Pass.ID}, "entry": {strconv.Itoa(r.held)}, "action": {action}}
	r.post = func() (int, string) { return post(t, c, r.url+"/review/resolve?p=shop", form) }
	return r
}

func TestResolveWaitsForReplicas(t *testing.T) {
	u := newReplicated(t, "keep")
	ls := u.ls
	resolution := func() memory.JournalEntry { return u.entry(t, u.held) }
	kept := func() []memory.Node { return heldMemories(t, u.unit) }

	// The replicas never confirm: 503, nothing resolved.
	ls.Refuse(1 << 10)
	code, body := u.post()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "resolve it again") {
		t.Fatalf("replicas that do not confirm: %d, want 503 saying to resolve it again\n%s", code, body)
	}
	if e := resolution(); e.Resolution != "" {
		t.Fatalf("the entry was resolved though its memory is not confirmed: %+v", e)
	}
	if n := len(kept()); n != 1 {
		t.Fatalf("%d memories of the held fact after the first attempt, want 1 (stored, not confirmed)", n)
	}

	// Resolved again, its write lost with a failover: written again, once.
	ls.Refuse(0)
	ls.LoseNext(1)
	calls := ls.Calls()
	if code, body := u.post(); code != http.StatusSeeOther {
		t.Fatalf("resolving again: %d\n%s", code, body)
	}
	if n := ls.Calls() - calls; n != 2 {
		t.Errorf("waited for replicas %d times, want 2 (the write a failover took, written again)", n)
	}
	e := resolution()
	if e.Resolution != memory.ResolveKeep {
		t.Fatalf("entry after resolving again: %+v", e)
	}
	got := kept()
	if len(got) != 1 || got[0].ID != e.ResolvedID {
		t.Fatalf("memories of the held fact %+v, want one: the resolution's %s", got, e.ResolvedID)
	}
	if _, err := u.st.Get(u.ctx, e.ResolvedID); err != nil {
		t.Fatalf("the kept memory is not reachable by id: %v", err)
	}
}

// A merge is a revision: the new memory, the old one's close and the edge
// between them, on the project's server. A failover that took them all
// is mended by writing the new memory again and closing the old one by
// it again; the journal then says merged, and the memory it resembles is
// superseded by the resolution's. (The review of stop 52 found the close
// left out: the journal said merged, both memories stayed live.)
func TestMergeLostWithAFailoverIsWrittenAgain(t *testing.T) {
	u := newReplicated(t, "merge")
	u.ls.LoseNextRevise(1)
	if code, body := u.post(); code != http.StatusSeeOther {
		t.Fatalf("merge: %d\n%s", code, body)
	}
	e := u.entry(t, u.held)
	if fly := u.get(t, u.fly.ID); e.Resolution != memory.ResolveMerge || fly.SupersededBy != e.ResolvedID || fly.Live() {
		t.Fatalf("journal says %q -> %s, the memory it resembles is superseded by %q (live: %v)", e.Resolution, e.ResolvedID, fly.SupersededBy, fly.Live())
	}
	if n := u.get(t, e.ResolvedID); n.Label != heldText || !n.Live() {
		t.Fatalf("the merged revision: %+v", n)
	}
}

// A merge the replicas did not confirm (503) can be resolved again: the
// revision is found by its digest, no second one is stored.
func TestMergeAgainAfterUnconfirmed(t *testing.T) {
	u := newReplicated(t, "merge")
	u.ls.Refuse(1 << 10)
	if code, body := u.post(); code != http.StatusServiceUnavailable {
		t.Fatalf("merge unconfirmed: %d\n%s", code, body)
	}
	u.ls.Refuse(0)
	if code, body := u.post(); code != http.StatusSeeOther {
		t.Fatalf("merge again: %d\n%s", code, body)
	}
	e := u.entry(t, u.held)
	if fly := u.get(t, u.fly.ID); e.Resolution != memory.ResolveMerge || fly.SupersededBy != e.ResolvedID {
		t.Fatalf("entry %+v, the memory it resembles superseded by %q", e, fly.SupersededBy)
	}
	if got := heldMemories(t, u.unit); len(got) != 1 || got[0].ID != e.ResolvedID {
		t.Fatalf("revisions of the held fact %+v, want one: the resolution's %s", got, e.ResolvedID)
	}
}

// entry is entry i of the seeded pass's journal as stored now.
func (u *unit) entry(t *testing.T, i int) memory.JournalEntry {
	t.Helper()
	p, err := u.st.GetPass(u.ctx, memory.ProjectRef{Project: "shop"}, u.pass.Pass.ID)
	if err != nil {
		t.Fatal(err)
	}
	return p.Entries[i]
}

// heldMemories are the memories holding the held fact's text.
func heldMemories(t *testing.T, u *unit) []memory.Node {
	t.Helper()
	var out []memory.Node
	err := u.st.Scan(u.ctx, func(n memory.Node) error {
		if n.Label == heldText {
			out = append(out, n)
		}
		return nil
	}, func(memory.Edge) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return out
}
