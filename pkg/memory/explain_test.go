package memory

import (
	"testing"
	"time"
)

// TestPriorParts: the parts the explanation shows multiply to Prior.
func TestPriorParts(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, n := range []Node{
		{Confidence: 0.8, UpdatedAt: now.Add(-48 * time.Hour)},
		{Confidence: 0.4, Weight: 3, Useful: 2, Unhelpful: 5, AccessedAt: now.Add(-400 * 24 * time.Hour), StaleAt: now},
		{Confidence: 1},
	} {
		r, rec, st, c := priorParts(&n, now)
		if got := r * rec * st * c; got != Prior(&n, now) {
			t.Errorf("%+v: parts give %v, Prior %v", n, got, Prior(&n, now))
		}
		if n.Stale() != (st == StalePrior) {
			t.Errorf("staleness %v for stale %v", st, n.Stale())
		}
	}
}

// TestInjectionNamesCutCandidates: a record whose explanation names an
// erased memory as a cut candidate names it (an erasure deletes it).
func TestInjectionNamesCutCandidates(t *testing.T) {
	in := Injection{IDs: []string{"a"}, Why: &BlockWhy{Cut: []CutWhy{{ID: "gone", Rule: "under-floor"}}}}
	if !InjectionNames(in, func(id string) bool { return id == "gone" }) {
		t.Error("a cut candidate's id is not seen")
	}
	if InjectionNames(in, func(id string) bool { return id == "other" }) {
		t.Error("an id the record does not hold is seen")
	}
}
