package sqlite

import (
	"fmt"
	"math/rand/v2"
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
		switch r.IntN(4) {
		case 0:
			return time.Time{}
		case 1:
			return now.Add(-time.Hour)
		case 2:
			return now // closed at this very instant: no longer valid
		}
		return now.Add(time.Hour)
	}
	x := newIndex(nil)
	var heads []memory.Node
	for i := range 2000 {
		h := memory.Node{ID: fmt.Sprintf("n%d", i), ProjectID: pick("", "p", "q", "r"), SessionID: pick("", "s1", "s2"),
			Scope:      memory.Scope(pick(string(memory.ScopeSession), string(memory.ScopeProject), string(memory.ScopeGlobal))),
			Reach:      memory.Reach(pick(string(memory.ReachHere), string(memory.ReachAnywhere))),
			Subkind:    memory.Subkind(pick(string(memory.Decision), string(memory.Preference), string(memory.Observation))),
			Confidence: r.Float64(), ArchivedAt: when(), ValidTo: when(), SupersededBy: pick("", "", "n1")}
		heads = append(heads, h)
		x.apply([]change{{rid: uint32(i + 1), n: h}})
	}
	agree, shown := 0, 0
	for range 400 {
		f := memory.Filter{ProjectID: pick("", "p", "q", "unknown"), SessionID: pick("", "s1", "s2", "s9"),
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
