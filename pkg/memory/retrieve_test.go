package memory

import (
	"math"
	"testing"
	"time"
)

func TestQueryProfile(t *testing.T) {
	cases := []struct {
		q    string
		want Profile
	}{
		{"how do we deploy the staging cluster", ProfileProse},
		{"", ProfileProse},
		{"why does parseConfig() fail in internal/config/load.go", ProfileMixed},
		{"internal/config/load.go parse_config loadEnv()", ProfileCode},
		{"fix main.go", ProfileMixed},                        // 1 of 2 = 0.5
		{"main.go server.ts", ProfileCode},                   // 2 of 2
		{"use snake_case names please ok now", ProfileProse}, // 1 of 6 = 0.17
		{"version 1.2 is out", ProfileProse},                 // a number is not an extension
		{"the end.", ProfileProse},                           // a trailing full stop is not an extension
		{"e.g. caching, i.e. Redis", ProfileProse},           // dotted abbreviations are not file names
		{"a.go b.go c.go and then", ProfileCode},             // 3 of 5 = 0.6: the code threshold itself
		{"a.go b.go and then some", ProfileMixed},            // 2 of 5 = 0.4
		{"a.go and then some more", ProfileMixed},            // 1 of 5 = 0.2: the mixed threshold itself
		{"a.go and then some more words", ProfileProse},      // 1 of 6 = 0.17
	}
	for _, c := range cases {
		if got := QueryProfile(c.q); got != c.want {
			t.Errorf("QueryProfile(%q) = %s, want %s", c.q, got, c.want)
		}
	}
}

func TestProfileWeights(t *testing.T) {
	cases := []struct {
		p      Profile
		lw, vw float64
	}{{ProfileCode, 1.4, 0.6}, {ProfileMixed, 1.15, 0.85}, {ProfileProse, 0.8, 1.2}}
	for _, c := range cases {
		if lw, vw := c.p.Weights(); lw != c.lw || vw != c.vw {
			t.Errorf("%s weights = %v/%v, want %v/%v", c.p, lw, vw, c.lw, c.vw)
		}
	}
}

func TestPrior(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	base := Node{Weight: 1, Confidence: 1, UpdatedAt: now}
	if got := Prior(&base, now); math.Abs(got-1) > 1e-9 {
		t.Fatalf("fresh neutral node prior = %v, want 1", got)
	}
	pinned := base
	pinned.Pinned = true
	pinned.Confidence = 0.1
	if got := Prior(&pinned, now); got != PinnedPrior {
		t.Errorf("pinned prior = %v, want %v", got, PinnedPrior)
	}
	useful := base
	useful.Useful = 3
	useful.Weight = 3
	want := 1 + 0.15*math.Log(3) + 0.18*math.Log(4)
	if got := Prior(&useful, now); math.Abs(got-want) > 1e-9 {
		t.Errorf("useful prior = %v, want %v", got, want)
	}
	mixed := base
	mixed.Useful, mixed.Unhelpful = 1, 3
	want = 1 + 0.18*math.Log(2) - 0.1*math.Log(4)
	if got := Prior(&mixed, now); math.Abs(got-want) > 1e-9 {
		t.Errorf("1 useful, 3 unhelpful prior = %v, want %v", got, want)
	}
	bad := base
	bad.Unhelpful = 1000
	if got := Prior(&bad, now); math.Abs(got-0.5) > 1e-9 {
		t.Errorf("unhelpful prior = %v, want the 0.5 floor", got)
	}
	old := base
	old.UpdatedAt = now.Add(-90 * 24 * time.Hour)
	want = 0.6 + 0.4*math.Exp(-1)
	if got := Prior(&old, now); math.Abs(got-want) > 1e-9 {
		t.Errorf("90-day-old prior = %v, want %v", got, want)
	}
	accessed := old
	accessed.AccessedAt = now // age runs from the last access
	if got := Prior(&accessed, now); math.Abs(got-1) > 1e-9 {
		t.Errorf("accessed prior = %v, want 1", got)
	}
	stale := base
	stale.StaleAt = now
	stale.Confidence = 0.5
	want = StalePrior * 0.75
	if got := Prior(&stale, now); math.Abs(got-want) > 1e-9 {
		t.Errorf("stale half-confident prior = %v, want %v", got, want)
	}
}

func TestContradictionWinner(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	user := Node{ID: "a", AssertedBy: AssertedUser, Scope: ScopeSession, UpdatedAt: t0}
	inferred := Node{ID: "b", AssertedBy: AssertedInferred, Scope: ScopeGlobal, UpdatedAt: t0.Add(time.Hour)}
	if w := ContradictionWinner(&user, &inferred); w.ID != "a" {
		t.Errorf("authority: winner %s, want a", w.ID)
	}
	if w := ContradictionWinner(&inferred, &user); w.ID != "a" {
		t.Errorf("authority (swapped): winner %s, want a", w.ID)
	}
	proj := Node{ID: "c", AssertedBy: AssertedAssistant, Scope: ScopeProject, UpdatedAt: t0.Add(time.Hour)}
	glob := Node{ID: "d", AssertedBy: AssertedAssistant, Scope: ScopeGlobal, UpdatedAt: t0}
	if w := ContradictionWinner(&proj, &glob); w.ID != "d" {
		t.Errorf("scope: winner %s, want d", w.ID)
	}
	older := Node{ID: "e", AssertedBy: AssertedAssistant, Scope: ScopeProject, UpdatedAt: t0}
	newer := Node{ID: "f", AssertedBy: AssertedAssistant, Scope: ScopeProject, UpdatedAt: t0.Add(time.Minute)}
	if w := ContradictionWinner(&older, &newer); w.ID != "f" {
		t.Errorf("recency: winner %s, want f", w.ID)
	}
}

func TestPreciseCut(t *testing.T) {
	few := []Scored{{"a", 0.9}, {"b", 0.1}}
	if got := preciseCut(few); len(got) != 2 {
		t.Errorf("under 8 samples nothing is cut, got %d", len(got))
	}
	// Eight samples: one clear match and a flat tail.
	vec := []Scored{{"a", 0.9}, {"b", 0.3}, {"c", 0.3}, {"d", 0.3}, {"e", 0.3}, {"f", 0.3}, {"g", 0.3}, {"h", 0.3}}
	got := preciseCut(vec)
	if len(got) != 1 || got[0].ID != "a" {
		t.Errorf("precise cut kept %v, want only a", got)
	}
	// A uniformly weak list is cut at the 0.35 floor.
	weak := []Scored{{"a", 0.34}, {"b", 0.33}, {"c", 0.33}, {"d", 0.33}, {"e", 0.33}, {"f", 0.33}, {"g", 0.33}, {"h", 0.33}}
	if got := preciseCut(weak); len(got) != 0 {
		t.Errorf("weak list kept %v, want nothing", got)
	}
}

func TestNaturalCompare(t *testing.T) {
	ordered := []string{"", "0", "1", "9", "01", "10", "99", "010", "100", "a", "a1", "a2", "a9", "a10", "a10b", "a10c", "a11", "ab",
		"conv-43-D1-2", "conv-43-D1-10", "conv-43-D2-1", "conv-43-D10-1"}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := NaturalCompare(a, b); got != want {
				t.Errorf("NaturalCompare(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func TestCompareConversation(t *testing.T) {
	t0 := time.Date(2023, 5, 1, 10, 0, 0, 0, time.UTC)
	a := &Node{ID: "t-10", CreatedAt: t0, UpdatedAt: t0.Add(time.Hour)}
	b := &Node{ID: "t-9", CreatedAt: t0.Add(time.Hour), UpdatedAt: t0} // imported: written at its update
	c := &Node{ID: "t-1", CreatedAt: t0.Add(time.Millisecond)}
	if CompareConversation(b, a) >= 0 || CompareConversation(a, c) >= 0 || CompareConversation(a, a) != 0 {
		t.Errorf("order of %v %v %v: want t-9, t-10 (same time, natural order), then t-1 (a millisecond later)", a, b, c)
	}
}

func TestIsQuestion(t *testing.T) {
	for label, want := range map[string]bool{
		"Audrey: How long do you walk them for?": true,
		"Tim: Have you read \"Dune?\" ":          true,
		"Tim: Did you see it (the game?)":        true,
		"What's up? I got a new job!":            false,
		"I wonder why":                           false,
		"":                                       false,
	} {
		if got := IsQuestion(&Node{Label: label}); got != want {
			t.Errorf("IsQuestion(%q) = %v, want %v", label, got, want)
		}
	}
}
