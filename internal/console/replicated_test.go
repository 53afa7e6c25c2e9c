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
func TestResolveWaitsForReplicas(t *testing.T) {
	var ls *storetest.LosingUpserts
	u := newUnitWith(t, func(st memory.Store) memory.Store {
		ls = &storetest.LosingUpserts{Store: st, Lost: storetest.OpenSQLite(t)}
		return ls
	})
	c := client(t)
	csrf := u.login(t, c, tokShop)
	entry := u.heldEntry(t)
	form := url.Values{"csrf": {csrf}, "pass": {u.pass.Pass.ID}, "entry": {strconv.Itoa(entry)}, "action": {"keep"}}
	resolution := func() memory.JournalEntry {
		t.Helper()
		p, err := u.st.GetPass(u.ctx, memory.ProjectRef{Project: "shop"}, u.pass.Pass.ID)
		if err != nil {
			t.Fatal(err)
		}
		return p.Entries[entry]
	}
	kept := func() []memory.Node {
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

	// The replicas never confirm: 503, nothing resolved.
	ls.Refuse(1 << 10)
	code, body := post(t, c, u.url+"/review/resolve?p=shop", form)
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
	if code, body := post(t, c, u.url+"/review/resolve?p=shop", form); code != http.StatusSeeOther {
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
