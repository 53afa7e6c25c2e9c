package sqlite

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// TestGateMatchesVisible: the packed filter (gate.go) decides as
// memory.Visible does, over random heads and filters that mix every field
// the rules read, including ids the index has never seen.
func TestGateMatchesVisible(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	pick := func(vals ...string) string { return vals[r.IntN(len(vals))] }
	when := func() time.Time {
		switch r.IntN(7) {
		case 0:
			return time.Time{}
		case 1:
			return now.Add(-time.Hour)
		case 2:
			return now // closed at this very instant: no longer valid
		case 3:
			return time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC) // "forever": past an int64 of nanoseconds
		case 4:
			return time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC) // before it
		case 5:
			return time.Unix(0, 0)
		}
		return now.Add(time.Hour)
	}
	x := newIndex(nil)
	var heads []memory.Node
	for i := range 2000 {
		h := memory.Node{ID: fmt.Sprintf("n%d", i), TenantID: pick("", "", "acme", "p"), ProjectID: pick("", "p", "q", "r"), SessionID: pick("", "s1", "s2"),
			Scope:      memory.Scope(pick(string(memory.ScopeSession), string(memory.ScopeProject), string(memory.ScopeGlobal))),
			Reach:      memory.Reach(pick(string(memory.ReachHere), string(memory.ReachAnywhere))),
			Subkind:    memory.Subkind(pick(string(memory.Decision), string(memory.Preference), string(memory.Observation))),
			Confidence: r.Float64(), ArchivedAt: when(), ValidTo: when(), SupersededBy: pick("", "", "n1")}
		heads = append(heads, h)
		x.apply([]change{{rid: uint32(i + 1), n: h}})
	}
	agree, shown := 0, 0
	for range 400 {
		f := memory.Filter{TenantID: pick("", "acme", "p", "nobody"), ProjectID: pick("", "p", "q", "unknown"), SessionID: pick("", "s1", "s2", "s9"),
			CrossProject: r.IntN(2) == 0, IncludeArchived: r.IntN(3) == 0, IncludeSuperseded: r.IntN(3) == 0,
			MinConfidence: r.Float64() * 0.6}
		if r.IntN(4) == 0 {
			f.Subkinds = []memory.Subkind{memory.Decision}
		}
		x.mu.RLock()
		gf := x.compile(&f, now)
		for i := range heads {
			want := memory.Visible(&heads[i], f, now)
			if got := x.pass(uint32(i+1), &gf); got != want {
				t.Fatalf("filter %+v, head %+v: gate says %v, Visible %v", f, heads[i], got, want)
			}
			if want {
				shown++
			}
			agree++
		}
		if x.pass(0, &gf) || x.pass(uint32(len(heads)+5), &gf) {
			t.Fatal("a rid without a head passed")
		}
		x.mu.RUnlock()
	}
	if shown == 0 || shown == agree {
		t.Fatalf("degenerate sample: %d of %d visible", shown, agree)
	}
}

// TestIDCmpMatchesStrings: ordering heads by their gates' id keys agrees
// with comparing the ids, for ids that differ early, late (past the 16
// bytes the key holds), are prefixes of one another or hold zero bytes.
func TestIDCmpMatchesStrings(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var ids []string
	for i := range 300 {
		switch i % 5 {
		case 0:
			ids = append(ids, memory.NewID())
		case 1:
			ids = append(ids, fmt.Sprintf("fill%06d", r.IntN(1000)))
		case 2:
			ids = append(ids, "0123456789abcdef"+fmt.Sprintf("%d", r.IntN(50))) // shared 16-byte prefix
		case 3:
			ids = append(ids, "ab"+string(make([]byte, r.IntN(3)))+fmt.Sprint(r.IntN(3))) // zero bytes
		default:
			ids = append(ids, "ab"[:r.IntN(3)])
		}
	}
	x := newIndex(nil)
	rids := map[string]uint32{}
	for _, id := range ids {
		if _, ok := rids[id]; ok {
			continue
		}
		rid := uint32(len(rids) + 1)
		rids[id] = rid
		x.apply([]change{{rid: rid, n: memory.Node{ID: id, ProjectID: "p"}}})
	}
	for a, ra := range rids {
		for b, rb := range rids {
			if got, want := x.idCmp(ra, rb), strings.Compare(a, b); got != want {
				t.Fatalf("idCmp(%q, %q) = %d, strings.Compare %d", a, b, got, want)
			}
		}
	}
}
