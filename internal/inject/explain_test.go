package inject_test

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// explainGraph seeds a standing rule, memories that answer a deploy
// question well, a few that answer it weakly (the floor cuts them), one
// attached to a path and one reached only through an edge. Each is written
// a second after the one before, so that the conversation's order (by time,
// then by id) is the order written here, not the random ids': the last
// staging note is the deploy decision's context, a candidate under the
// floor.
func explainGraph(f *fixture) (rule, deploy, hop, onPath memory.Node) {
	add := func(n memory.Node) memory.Node {
		f.clock.t = f.clock.t.Add(time.Second)
		return f.add(n)
	}
	rule = add(memory.Node{Subkind: memory.Preference, Label: "Never use the rm tool", AssertedBy: memory.AssertedUser, Source: memory.SourceUser})
	for i := range 8 {
		add(memory.Node{Subkind: memory.Observation, Label: fmt.Sprintf("Staging note %d", i), Body: fmt.Sprintf("staging cluster %d was slow on release day", i)})
	}
	deploy = add(memory.Node{Subkind: memory.Decision, Label: "Deploys to production run through make release",
		Body: "The release target tags the image and rolls the Kubernetes deployment to production."})
	add(memory.Node{Subkind: memory.Pattern, Label: "Production deploys wait for the canary", Body: "a deploy to production waits ten minutes"})
	hop = add(memory.Node{Subkind: memory.EntityKind, Label: "Kubernetes cluster eu-west", Body: "hosts the shop"})
	if _, err := f.st.Link(f.ctx, memory.Edge{Src: deploy.ID, Dst: hop.ID, Relation: memory.About, Weight: 1}); err != nil {
		f.t.Fatal(err)
	}
	onPath = add(memory.Node{Subkind: memory.Pattern, Label: "Handlers log with zap", Paths: []string{"internal/shop/handler.go"}})
	return rule, deploy, hop, onPath
}

// TestExplainChangesNothing: the block with and without the explanation
// is the same block, the explanation is there only when asked for, and it
// says for each line the rule that admitted it and how each channel
// scored it; every ranked candidate not in the block is in the cut list
// with the rule that cut it.
func TestExplainChangesNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b, nil)
		rule, deploy, hop, onPath := explainGraph(f)
		for i, q := range []string{"how do we deploy to production?", "why was the staging release slow?", "ok"} {
			req := inject.Request{Project: "p1", Session: "s1", Text: q, Paths: []string{"internal/shop/handler.go"}, DryRun: true}
			plain, err := f.inj.Compose(f.ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			req.Explain = true
			explained, err := f.inj.Compose(f.ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if plain.Why != nil {
				t.Errorf("%q: an explanation nobody asked for", q)
			}
			why := explained.Why
			explained.Why = nil
			if !reflect.DeepEqual(plain, explained) {
				t.Fatalf("%q: the block changed with explain:\n%+v\n%+v", q, plain, explained)
			}
			if why == nil || len(why.Lines) != len(plain.IDs) {
				t.Fatalf("%q: explanation %+v for ids %v", q, why, plain.IDs)
			}
			for j, l := range why.Lines {
				if l.ID != plain.IDs[j] {
					t.Errorf("%q: line %d explains %s, the block has %s", q, j, l.ID, plain.IDs[j])
				}
				if j < len(plain.Standing) {
					if l.Rule != inject.RuleStanding || l.Why != nil {
						t.Errorf("%q: standing line %+v", q, l)
					}
					continue
				}
				line := plain.Recalled[j-len(plain.Standing)]
				if l.Why == nil || l.Why.Score != line.Score || len(l.Why.Channels) == 0 {
					t.Fatalf("%q: recalled line %s: %+v (score %v)", q, l.ID, l.Why, line.Score)
				}
				plateau := slices.ContainsFunc(why.Cut, func(c memory.CutWhy) bool { return c.Rule == inject.RulePlateau })
				want := map[bool]string{true: inject.RulePlateau, false: inject.RuleFloor}[plateau]
				if j == len(plain.Standing) {
					want = inject.RuleBest
				}
				if l.Rule != want {
					t.Errorf("%q: line %d rule %q, want %q", q, j, l.Rule, want)
				}
				if line.Score < why.Floor {
					t.Errorf("%q: line %s under the floor %v", q, l.ID, why.Floor)
				}
				// The score is (activation + fused) x prior: the parts
				// add up to what the ranking said.
				w := l.Why
				if got := (w.Activation + math.Max(w.Fused, w.Conversation)) * w.Prior.Value; !w.Foreign && math.Abs(got-w.Score) > 1e-9 {
					t.Errorf("%q: %s parts give %v, score %v", q, l.ID, got, w.Score)
				}
				var fused float64
				for _, c := range w.Channels {
					if c.Channel != memory.ChannelPaths && c.Channel != memory.ChannelGraph && c.Channel != memory.ChannelConversation {
						fused += c.Share
					}
				}
				if math.Abs(fused-w.Fused) > 1e-9 {
					t.Errorf("%q: %s channel shares add to %v, fused %v", q, l.ID, fused, w.Fused)
				}
			}
			if why.Lines[0].ID != rule.ID {
				t.Errorf("%q: the standing rule is not the first line", q)
			}
			for _, c := range why.Cut {
				if slices.Contains(plain.IDs, c.ID) || c.Rule == "" {
					t.Errorf("%q: cut %+v", q, c)
				}
				if c.Rule == inject.RuleUnderFloor && c.Score >= why.Floor {
					t.Errorf("%q: cut under the floor %v with %v", q, why.Floor, c.Score)
				}
			}
			whyOf := func(id string) *memory.Why {
				for _, l := range why.Lines {
					if l.ID == id {
						return l.Why
					}
				}
				return nil
			}
			switch i {
			case 0:
				channels := map[string]memory.ChannelWhy{}
				for _, l := range why.Lines {
					if l.ID == deploy.ID {
						for _, c := range l.Why.Channels {
							channels[c.Channel] = c
						}
					}
				}
				if c, ok := channels[memory.ChannelLexical]; !ok || c.Rank < 1 || c.Score <= 0 {
					t.Errorf("deploy decision: lexical %+v (channels %+v)", c, channels)
				}
				if len(why.Cut) == 0 {
					t.Errorf("nothing cut of a ranking with staging noise: %+v", why)
				}
				if w := whyOf(hop.ID); w != nil && !slices.ContainsFunc(w.Channels, func(c memory.ChannelWhy) bool { return c.Channel == memory.ChannelGraph }) {
					t.Errorf("the memory one hop from the deploy decision has no graph channel: %+v", w)
				}
			case 2: // "ok": only the session's path recalls
				if w := whyOf(onPath.ID); w == nil || !slices.ContainsFunc(w.Channels, func(c memory.ChannelWhy) bool { return c.Channel == memory.ChannelPaths && c.Rank == 1 }) {
					t.Errorf("the memory on the session's path: %+v", w)
				}
			}
		}
	})
}

// TestExplanationIsRecorded: a turn built with Explain records the
// explanation with its injection record, and a redelivery answers from
// the record with it.
func TestExplanationIsRecorded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b, nil)
		explainGraph(f)
		req := inject.Request{Project: "p1", Session: "s1", Turn: "t1", Text: "how do we deploy to production?", Explain: true}
		blk, err := f.inj.Build(f.ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		in, found, err := f.inj.Recorded(f.ctx, req)
		if err != nil || !found {
			t.Fatal(found, err)
		}
		if in.Why == nil || !reflect.DeepEqual(*in.Why, *blk.Why) {
			t.Errorf("recorded explanation %+v, want %+v", in.Why, blk.Why)
		}
		with, err := memory.EncodeInjection(in)
		if err != nil {
			t.Fatal(err)
		}
		in.Why = nil
		without, _ := memory.EncodeInjection(in)
		t.Logf("record: %d bytes, %d without the explanation (%d lines, %d cut)", len(with), len(without), len(blk.IDs), len(blk.Why.Cut))
	})
}
