package events_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// PlanLanes over random sequences of tenant sets: the default tenant alone
// in lane 0, every wanted tenant in a lane, nothing ever taken out of a
// lane (a tenant no longer wanted stays; nobody moves), and the named
// tenants spread (lane sizes differ by at most one while tenants are only
// added).
func TestPlanLanesOnlyGrows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 200 {
		cur := map[int][]string{}
		onlyAdded := true
		var want []string
		for step := range 8 {
			if rng.IntN(3) == 0 && len(want) > 0 {
				want = slices.Delete(slices.Clone(want), 0, rng.IntN(len(want))+1)
				onlyAdded = false
			}
			for range rng.IntN(12) {
				want = append(want, fmt.Sprintf("t%d", rng.IntN(60)))
			}
			plan := events.PlanLanes(cur, want)
			where := map[string]int{}
			for i, ts := range plan {
				for _, x := range ts {
					if prev, dup := where[x]; dup {
						t.Fatalf("run %d step %d: %q in lanes %d and %d", run, step, x, prev, i)
					}
					where[x] = i
				}
			}
			if where[""] != 0 || len(plan[0]) != 1 {
				t.Fatalf("run %d step %d: lane 0 is %q, want the default tenant alone", run, step, plan[0])
			}
			for _, x := range want {
				if _, ok := where[x]; !ok {
					t.Fatalf("run %d step %d: %q has no lane", run, step, x)
				}
			}
			for i, ts := range cur {
				for _, x := range ts {
					if !slices.Contains(plan[i], x) {
						t.Fatalf("run %d step %d: %q taken out of lane %d", run, step, x, i)
					}
				}
			}
			if onlyAdded {
				lo, hi := len(want), 0
				for i := 1; i < events.InjectorLanes; i++ {
					lo, hi = min(lo, len(plan[i])), max(hi, len(plan[i]))
				}
				if hi-lo > 1 {
					t.Fatalf("run %d step %d: lanes hold %d to %d named tenants", run, step, lo, hi)
				}
			}
			cur = plan
		}
	}
	// A tenant two setups placed twice stays in both lanes.
	if plan := events.PlanLanes(map[int][]string{0: {""}, 1: {"z"}, 2: {"z", "w"}}, []string{"z", "w"}); fmt.Sprint(plan) != "map[0:[] 1:[z] 2:[w z]]" {
		t.Errorf("a tenant in two lanes: %v", plan)
	}
}

func uniq(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// EnsureLanes on a server: lanes made for the tenants, read back by
// CurrentLanes, left alone when nothing changed, a tenant added to the
// emptiest lane, a removed one left where it was (lanes only grow), and
// nothing at all without named tenants.
func TestEnsureLanes(t *testing.T) {
	ctx := context.Background()
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	if cur, err := events.CurrentLanes(ctx, js, topo); err != nil || len(cur) != 0 {
		t.Fatalf("lanes without named tenants: %v, %v", cur, err)
	}
	topo.Lanes = []string{"acme", "glob ex.corp"}
	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	lanes := func(want map[int][]string) {
		t.Helper()
		cur, err := events.CurrentLanes(ctx, js, topo)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(cur) != fmt.Sprint(want) {
			t.Fatalf("lanes %v, want %v", cur, want)
		}
	}
	lanes(map[int][]string{0: {""}, 1: {"acme"}, 2: {"glob ex.corp"}})
	c, err := js.Consumer(ctx, events.StreamIn, events.LaneName(2))
	if err != nil {
		t.Fatal(err)
	}
	if f := c.CachedInfo().Config.FilterSubjects; len(f) != 1 || f[0] != topo.Subjects().InTypeTenant(events.TypeTurnStarted, "glob ex.corp") {
		t.Errorf("lane 2 filters %q", f)
	}
	created := c.CachedInfo().Created
	topo.Lanes = []string{"glob ex.corp", "beta"}
	if err := events.EnsureLanes(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	lanes(map[int][]string{0: {""}, 1: {"acme"}, 2: {"glob ex.corp"}, 3: {"beta"}})
	c, err = js.Consumer(ctx, events.StreamIn, events.LaneName(2))
	if err != nil || !c.CachedInfo().Created.Equal(created) {
		t.Errorf("lane 2 re-created (%v)", err)
	}
	topo.Lanes = nil
	if err := events.EnsureLanes(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	lanes(map[int][]string{0: {""}, 1: {"acme"}, 2: {"glob ex.corp"}, 3: {"beta"}})
}
