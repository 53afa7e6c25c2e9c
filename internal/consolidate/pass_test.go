package consolidate_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
)

func TestPassStoresAndFinishes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b.Open(t))
		f.say("I swim every Tuesday morning, and I prefer tea over coffee.", "Noted!")
		f.srv.Enqueue(remember("The user swims every Tuesday morning.", "pattern"), remember("The user prefers tea over coffee.", "preference"), done())
		res := f.run()
		if res.Verdict != consolidate.VerdictDone || res.Outcome.Stored != 2 || res.Pass.Steps != 3 {
			t.Fatalf("result %+v", res)
		}
		texts := f.liveTexts()
		if _, ok := texts["The user swims every Tuesday morning."]; !ok || len(texts) != 2 {
			t.Fatalf("live memories %v", texts)
		}
		msgs, _ := f.st.Messages(f.ctx, ref(), 0, 0)
		if c := f.cursor(); c != msgs[len(msgs)-1].ID {
			t.Fatalf("cursor %d, newest message %d", c, msgs[len(msgs)-1].ID)
		}
		ds := f.pub.done(t)
		if len(ds) != 1 || ds[0].Stored != 2 || ds[0].Steps != 3 || ds[0].Reason != "done" || ds[0].Pass != res.Pass.ID ||
			ds[0].PromptTokens == 0 || ds[0].CompletionTokens == 0 || len(ds[0].Changed) != 2 {
			t.Fatalf("consolidation_done %+v", ds)
		}
		// The context of every step: system text with the instructions,
		// the transcript, and the trailing message.
		req := f.srv.ChatRequests()[0]
		if len(req.Messages) != 3 || !strings.Contains(req.Messages[0].Content, "Nobody is waiting") ||
			!strings.Contains(req.Messages[1].Content, "I swim every Tuesday morning") {
			t.Fatalf("context %+v", req.Messages)
		}
		last := f.trailing(0)
		for _, want := range []string{"[Now: ", "STORED MEMORIES\n(none stored yet)", "Steps used: 0 of 12", "If memory already matches the conversation, call memory_done"} {
			if !strings.Contains(last, want) {
				t.Errorf("first trailing message lacks %q:\n%s", want, last)
			}
		}
		if second := f.trailing(1); !strings.Contains(second, "The user swims every Tuesday morning. (pattern; valid from") ||
			!strings.Contains(second, "active)") {
			t.Errorf("second step does not show the stored memory:\n%s", second)
		}
		if got := toolNames(req); !slices.Equal(got, []string{"memory_recall", "memory_remember", "memory_revise", "memory_forget", "memory_link", "memory_unlink", "memory_done"}) {
			t.Errorf("tools %v", got)
		}
		// Nothing new: no pass, no model call.
		n := len(f.srv.ChatRequests())
		if res := f.run(); !res.Empty || len(f.srv.ChatRequests()) != n {
			t.Fatalf("second run over nothing new: %+v", res)
		}
	})
}

// TestDoneRepublishedAfterFailedPublish: a pass that finished (cursor
// advanced, journal closed) but could not publish consolidation_done (NATS
// down, or killed in between) publishes it on the redelivery, with the
// pass's id; it used to find nothing new and end without it (the chaos
// suite's 10,000-turn run: a session consolidated, no consolidation_done).
func TestDoneRepublishedAfterFailedPublish(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b.Open(t))
		f.say("I swim every Tuesday morning.", "Noted!")
		f.srv.Enqueue(remember("The user swims every Tuesday morning.", "pattern"), done())
		f.pub.fail = 1
		if _, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session, Cause: "idle-1"}); err == nil {
			t.Fatal("a failed consolidation_done publish was not an error (the event would be acknowledged)")
		}
		if len(f.pub.done(t)) != 0 {
			t.Fatal("published despite the outage")
		}
		n := len(f.srv.ChatRequests())
		if _, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session, Cause: "idle-1"}); err != nil {
			t.Fatal(err)
		}
		ds := f.pub.done(t)
		if len(ds) != 1 || ds[0].Stored != 1 || ds[0].Reason != "done" {
			t.Fatalf("consolidation_done after the redelivery: %+v", ds)
		}
		if len(f.srv.ChatRequests()) != n {
			t.Errorf("the finished pass called the model again")
		}
		if texts := f.liveTexts(); len(texts) != 1 {
			t.Errorf("live memories %v", texts)
		}
	})
}

// TestNudgeThenAbort: prose answers are nudged, and past the nudges the
// pass ends stuck; the cursor stays (the next pass reads the window again:
// see TestStuckPassIsReadAgainThenSkipped), and that pass, with a model
// that calls memory_done, moves it.
func TestNudgeThenAbort(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	f.say("Can you recommend a book?", "Try Dune.")
	f.srv.Enqueue(llmtest.Text("Sure, Dune is a great book!"), llmtest.Text("I already answered."), llmtest.Text("Nothing to do."))
	res := f.run()
	if len(res.Passes) != 3 || res.Passes[0].Verdict != string(consolidate.VerdictStuck) || res.Passes[0].Steps != 3 ||
		res.Verdict != consolidate.VerdictDone {
		t.Fatalf("result %+v", res)
	}
	if n := len(f.srv.ChatRequests()); n != 5 {
		t.Fatalf("%d model calls, want 3, then 1 for each half of the window", n)
	}
	second, third := f.trailing(1), f.trailing(2)
	if !strings.Contains(second, "Only a tool call moves anything") || !strings.Contains(second, `"Sure, Dune is a great book!"`) ||
		strings.Contains(second, "last prompt") {
		t.Errorf("first nudge:\n%s", second)
	}
	if !strings.Contains(third, "This is the last prompt") {
		t.Errorf("second nudge:\n%s", third)
	}
	if ds := f.pub.done(t); len(ds) != 3 || ds[0].Reason != "stuck" || ds[0].UpTo != 0 || ds[1].Reason != "done" || ds[1].UpTo != 1 || ds[2].UpTo != 2 {
		t.Fatalf("consolidation_done %+v", ds)
	}
	if f.cursor() != 2 {
		t.Fatalf("cursor %d", f.cursor())
	}
}

func TestRepeatAndRecallLimit(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	f.seed(memory.Node{Subkind: memory.Preference, Label: "The user likes jazz."})
	f.say("I listen to jazz a lot.", "Nice.")
	q := map[string]any{"query": "jazz"}
	f.srv.Enqueue(call(consolidate.ToolRecall, q), call(consolidate.ToolRecall, q), call(consolidate.ToolRecall, map[string]any{"query": "music"}),
		call(consolidate.ToolRecall, q), done())
	res := f.run()
	if res.Verdict != consolidate.VerdictDone {
		t.Fatalf("result %+v", res)
	}
	reqs := f.srv.ChatRequests()
	if !strings.Contains(f.trailing(1), "The user likes jazz.") || !strings.Contains(f.trailing(1), "RESULT OF YOUR LAST CALL\nRecall \"jazz\" found:") {
		t.Errorf("recall result not shown:\n%s", f.trailing(1))
	}
	if !strings.Contains(f.trailing(2), "the answer has not changed") {
		t.Errorf("repeat not noticed:\n%s", f.trailing(2))
	}
	if slices.Contains(toolNames(reqs[2]), consolidate.ToolRecall) == false {
		t.Errorf("recall withdrawn after 2 recalls")
	}
	if !strings.Contains(f.trailing(3), "Inspection is over") || slices.Contains(toolNames(reqs[3]), consolidate.ToolRecall) {
		t.Errorf("after 3 recalls: tools %v\n%s", toolNames(reqs[3]), f.trailing(3))
	}
	// The 4th call asked for the withdrawn tool: a failed step, still blocked.
	if !strings.Contains(f.trailing(4), "memory_recall is withdrawn") {
		t.Errorf("a withdrawn tool's call is not reported:\n%s", f.trailing(4))
	}
}

func TestBudget(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	f.say("Lots of facts today.", "")
	for i := range 20 {
		f.srv.Enqueue(remember("Fact number "+strings.Repeat("i", i+1)+" about the user's garden "+string(rune('a'+i))+".", "observation"))
	}
	f.srv.OnChatAlways(llmtest.Any(), done())
	res := f.run()
	lim := consolidate.DefaultLimits()
	if first := res.Passes[0]; first.Verdict != string(consolidate.VerdictBudget) || first.Steps != lim.Budget+1 {
		t.Fatalf("result %+v", res)
	}
	if d := f.trailing(lim.Budget); !strings.Contains(d, "budget (12) is spent: call memory_done now. Nothing already stored is lost.") {
		t.Errorf("the step past the budget was not told:\n%s", d)
	}
	if ds := f.pub.done(t); len(ds) < 1 || ds[0].Reason != "budget" || ds[0].Steps != 13 {
		t.Fatalf("consolidation_done %+v", ds)
	}
}

func TestDuplicateRefusedAndNearDuplicateHeld(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b.Open(t))
		old := f.seed(memory.Node{Subkind: memory.Preference, Label: "The user prefers green tea in the morning."})
		f.say("I prefer green tea in the morning, and my cat is called Miso.", "")
		f.srv.Enqueue(
			remember("the user prefers  GREEN tea in the morning!", "preference"), // the same after normalising
			remember("The user prefers green tea each morning.", "preference"),    // a near-duplicate
			call(consolidate.ToolRemember, map[string]any{"text": "The user prefers green tea each morning.", "kind": "preference", "confirm_similar": true}),
			remember("The user's cat is called Miso.", "observation"),
			done())
		res := f.run()
		o := res.Outcome
		if o.Duplicates != 1 || o.Held != 1 || o.Stored != 2 {
			t.Fatalf("outcome %+v", o)
		}
		if s := f.trailing(1); !strings.Contains(s, "refused: memory already holds "+short(t, res.Pass, old.ID)) {
			t.Errorf("refusal not reported:\n%s", s)
		}
		if s := f.trailing(2); !strings.Contains(s, "held for review: close to "+short(t, res.Pass, old.ID)) || !strings.Contains(s, "confirm_similar true") {
			t.Errorf("hold not reported:\n%s", s)
		}
		texts := f.liveTexts()
		if _, ok := texts["The user prefers green tea each morning."]; !ok || len(texts) != 3 {
			t.Fatalf("live %v", texts)
		}
		if ds := f.pub.done(t); ds[0].Duplicates != 1 || ds[0].Held != 1 {
			t.Fatalf("consolidation_done %+v", ds[0])
		}
	})
}

func TestNormaliseAndOverlap(t *testing.T) {
	if a, b := consolidate.NormaliseFact("  The user  likes TEA!.. "), consolidate.NormaliseFact("the user likes tea"); a != b {
		t.Fatalf("%q != %q", a, b)
	}
	if o := consolidate.Overlap("the user likes green tea", "the user likes black coffee"); o >= 0.5 {
		t.Fatalf("overlap %v", o)
	}
	if o := consolidate.Overlap("user swims every tuesday", "user swims every tuesday morning"); o < 0.5 {
		t.Fatalf("overlap %v", o)
	}
}

func TestReviseThenAsOf(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		clock := memorytest.NewClock()
		st := b.Open(t, storetest.WithClock(clock.Now))
		f := newFixture(t, st, consolidate.WithClock(clock.Now))
		old := f.seed(memory.Node{Subkind: memory.Observation, Label: "The user lives in Lyon."})
		clock.Advance(72 * time.Hour)
		f.say("I moved to Porto last month.", "")
		f.srv.Enqueue(callOn(t, consolidate.ToolRevise, old.Label, map[string]any{"text": "The user lives in Porto.", "said_by_user": true, "reason": "moved"}),
			call(consolidate.ToolRecall, map[string]any{"as_of": memorytest.Epoch.Format(time.DateOnly)}), done())
		res := f.run()
		if res.Outcome.Revised != 1 {
			t.Fatalf("outcome %+v", res.Outcome)
		}
		if o := f.get(old.ID); o.Live() || o.SupersededBy == "" || o.ValidTo.IsZero() {
			t.Fatalf("the old fact is not closed: %+v", o)
		}
		texts := f.liveTexts()
		if _, ok := texts["The user lives in Porto."]; !ok || len(texts) != 1 {
			t.Fatalf("live %v", texts)
		}
		asOf := f.trailing(2)
		if !strings.Contains(asOf, "as of "+memorytest.Epoch.Format(time.DateOnly)+" found:\n"+short(t, res.Pass, old.ID)+" The user lives in Lyon.") || strings.Contains(asOf, "found:\n[") && strings.Contains(asOf[strings.Index(asOf, "found:"):], "Porto.") {
			t.Errorf("as-of read:\n%s", asOf)
		}
		// The closed fact is still shown, closed, among the stored memories.
		if !strings.Contains(asOf, "The user lives in Lyon. (observation; valid from "+memorytest.Epoch.Format(time.DateOnly)+".."+clock.Now().Format(time.DateOnly)+"; closed)") {
			t.Errorf("closed fact not shown as closed:\n%s", asOf)
		}
	})
}

func TestCascadeListing(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	job := f.seed(memory.Node{Subkind: memory.Observation, Label: "The user works at Acme as a baker."})
	commute := f.seed(memory.Node{Subkind: memory.Pattern, Label: "The user bikes to the Acme bakery every day."})
	if _, err := f.st.Link(f.ctx, memory.Edge{Src: commute.ID, Dst: job.ID, Relation: memory.CausedBy}); err != nil {
		t.Fatal(err)
	}
	f.say("I quit Acme, I work from home now.", "")
	f.srv.Enqueue(callOn(t, consolidate.ToolRevise, job.Label, map[string]any{"text": "The user works from home.", "said_by_user": true}),
		callOn(t, consolidate.ToolForget, commute.Label, map[string]any{"reason": "depended on the old job"}), done())
	res := f.run()
	if res.Outcome.Revised != 1 || res.Outcome.Forgotten != 1 {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	s := f.trailing(1)
	if !strings.Contains(s, "linked to these live memories") || !strings.Contains(s, short(t, res.Pass, commute.ID)+" The user bikes to the Acme bakery every day.") ||
		!strings.Contains(s, "<- caused_by") {
		t.Errorf("cascade not listed:\n%s", s)
	}
	if strings.Contains(f.trailing(2), "linked to these live memories") {
		t.Errorf("cascade listed again after a forget with no dependants:\n%s", f.trailing(2))
	}
	if ds := f.pub.done(t); len(ds) != 1 || ds[0].Revised != 1 || ds[0].Forgotten != 1 || ds[0].Stored != 0 {
		t.Fatalf("consolidation_done %+v", ds)
	}
}

// TestCascadeListsSharedEntities: a fact with no edge to the changed one
// but one of its entities is listed, with the entity it shares.
func TestCascadeListsSharedEntities(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	job := f.seed(memory.Node{Subkind: memory.Observation, Label: "The user works at Acme as a baker.", Entities: []memory.Entity{{Name: "Acme"}}})
	perk := f.seed(memory.Node{Subkind: memory.Observation, Label: "The user gets free bread at work.", Entities: []memory.Entity{{Name: "Acme"}}})
	other := f.seed(memory.Node{Subkind: memory.Preference, Label: "The user likes rye bread.", Entities: []memory.Entity{{Name: "Rye"}}})
	f.say("I left Acme.", "")
	f.srv.Enqueue(callOn(t, consolidate.ToolRevise, job.Label, map[string]any{"text": "The user no longer works at Acme.", "said_by_user": true}), done())
	res := f.run()
	s := f.trailing(1)
	if !strings.Contains(s, "linked to these live memories") || !strings.Contains(s, short(t, res.Pass, perk.ID)+" The user gets free bread at work.") ||
		!strings.Contains(s, "<- shares Acme") || strings.Contains(s[strings.Index(s, "linked to these live memories"):], other.Label) {
		t.Errorf("shared-entity cascade:\n%s", s)
	}
}

func TestTopicLinkAndUnlink(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	f.say("I climb every weekend; climbing is my thing.", "")
	f.srv.Enqueue(
		call(consolidate.ToolRemember, map[string]any{"text": "The user climbs every weekend.", "kind": "pattern", "topic": "Climbing"}),
		callOn(t, consolidate.ToolUnlink, "The user climbs every weekend.", map[string]any{"topic": "climbing", "relation": "involved_in"}),
		callOn(t, consolidate.ToolUnlink, "The user climbs every weekend.", map[string]any{"topic": "climbing", "relation": "involved_in"}),
		done())
	res := f.run()
	if res.Outcome.Stored != 1 || res.Outcome.Linked != 1 || res.Outcome.Unlinked != 1 {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	if !strings.Contains(f.trailing(2), "there was a link") || !strings.Contains(f.trailing(3), "there was no such link") {
		t.Errorf("unlink does not say whether there was a link:\n%s\n%s", f.trailing(2), f.trailing(3))
	}
	// The edge is closed (valid-to set), not deleted: the journal holds it
	// with its valid-to, and it is no longer among the live edges.
	var unlinked *memory.JournalEntry
	for i, e := range res.Pass.Entries {
		if e.Op == memory.OpUnlink {
			unlinked = &res.Pass.Entries[i]
		}
	}
	if unlinked == nil || unlinked.Edge == nil || unlinked.Edge.ValidTo.IsZero() || unlinked.Edge.ValidFrom.IsZero() ||
		unlinked.Edge.ValidTo.Before(unlinked.Edge.ValidFrom) || unlinked.Edge.Relation != memory.InvolvedIn {
		t.Fatalf("unlink journal entry %+v", unlinked)
	}
	if edges, err := f.st.Edges(f.ctx, unlinked.Edge.Src); err != nil || len(edges) != 0 {
		t.Errorf("live edges after unlink: %+v %v", edges, err)
	}
	if ds := f.pub.done(t); len(ds) != 1 || ds[0].Stored != 1 || ds[0].Linked != 1 {
		t.Fatalf("consolidation_done %+v", ds)
	}
}

func TestSplitCutOffLeavesBoth(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b.Open(t))
		bundle := f.seed(memory.Node{Subkind: memory.Preference, Label: "The user likes hiking and plays the cello on Sundays."})
		f.say("Yes I hike, and Sunday is cello day.", "")
		f.srv.Enqueue(remember("The user likes hiking.", "preference"), remember("The user plays the cello on Sundays.", "pattern"))
		// The model goes away between the pieces and the forget.
		f.srv.OnChatAlways(llmtest.Any(), llmtest.ServerError("model runner crashed"))
		_, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session})
		if err == nil {
			t.Fatal("a pass whose model failed succeeded")
		}
		texts := f.liveTexts()
		if len(texts) != 3 || texts["The user likes hiking and plays the cello on Sundays."] != bundle.ID {
			t.Fatalf("after the cut: %v", texts)
		}
		if c := f.cursor(); c != 0 {
			t.Fatalf("a cut-off pass moved the cursor to %d", c)
		}
		// The next delivery resumes with the ledger and forgets the bundle.
		f.srv.Reset()
		f.srv.SetDefault(done())
		f.srv.Enqueue(callOn(t, consolidate.ToolForget, bundle.Label, map[string]any{"reason": "split into its pieces"}), done())
		res := f.run()
		if res.Verdict != consolidate.VerdictDone || res.Pass.Steps != 4 || res.Outcome.Stored != 2 || res.Outcome.Forgotten != 1 {
			t.Fatalf("resumed pass %+v", res)
		}
		if !strings.Contains(f.trailing(0), "Steps used: 2 of 12") {
			t.Errorf("the resumed pass lost its ledger:\n%s", f.trailing(0))
		}
		if texts := f.liveTexts(); len(texts) != 2 {
			t.Fatalf("after the resumed pass: %v", texts)
		}
	})
}

func TestModelDownWaitsAndLosesNothing(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	f.say("I am learning Portuguese.", "")
	f.srv.Down()
	_, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session})
	cl := consolidate.Classify(err)
	if err == nil || !runner.IsUnavailable(cl) {
		t.Fatalf("error %v classified %v, want unavailable", err, cl)
	}
	if f.cursor() != 0 {
		t.Fatal("the cursor moved while the model was down")
	}
	f.srv.Up()
	f.srv.Enqueue(remember("The user is learning Portuguese.", "decision"), done())
	res := f.run()
	if res.Verdict != consolidate.VerdictDone || res.Outcome.Stored != 1 || f.cursor() == 0 {
		t.Fatalf("after the outage: %+v", res)
	}
}

func TestTwoReplicasOnePass(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		f := newFixture(t, st)
		g := newFixture(t, st)
		f.say("I run on Mondays.", "")
		slow := remember("The user runs on Mondays.", "pattern").After(300 * time.Millisecond)
		f.srv.Enqueue(slow, done())
		g.srv.Enqueue(slow, done())
		type out struct {
			res consolidate.Result
			err error
		}
		ch := make(chan out, 2)
		for _, x := range []*fixture{f, g} {
			go func() {
				res, err := x.c.Run(x.ctx, consolidate.Request{Project: project, Session: session})
				ch <- out{res, err}
			}()
		}
		a, c := <-ch, <-ch
		if a.err != nil || c.err != nil {
			t.Fatal(a.err, c.err)
		}
		if a.res.Busy == c.res.Busy {
			t.Fatalf("busy %v and %v: want exactly one pass", a.res.Busy, c.res.Busy)
		}
		if n := len(f.srv.ChatRequests()) + len(g.srv.ChatRequests()); n != 2 {
			t.Fatalf("%d model calls, want 2 (one pass)", n)
		}
		if texts := f.liveTexts(); len(texts) != 1 {
			t.Fatalf("live %v", texts)
		}
	})
}

func TestCursorNeverMovesBack(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	f.say("I like chess.", "")
	f.srv.Enqueue(remember("The user likes chess.", "preference"), done())
	f.run()
	first := f.cursor()
	f.say("I also like go, the board game.", "")
	f.srv.Enqueue(remember("The user likes the board game go.", "preference"), done())
	f.run()
	second := f.cursor()
	if !(second > first && first > 0) {
		t.Fatalf("cursor %d then %d", first, second)
	}
	// An operator (or a stale replica) moving it further must not be undone.
	if _, err := f.st.AdvanceCursor(f.ctx, ref(), second+100); err != nil {
		t.Fatal(err)
	}
	f.say("Chess on Fridays.", "")
	if res := f.run(); !res.Empty {
		t.Fatalf("a message below the cursor was consolidated again: %+v", res)
	}
	if c := f.cursor(); c != second+100 {
		t.Fatalf("cursor moved back to %d", c)
	}
}

func TestPieceOf(t *testing.T) {
	bundle := "The user likes hiking and plays the cello on Sundays."
	if !consolidate.PieceOf("The user plays the cello on Sundays.", bundle) || !consolidate.PieceOf("The user likes hiking.", bundle) {
		t.Fatal("a piece of the bundle is not recognised")
	}
	if consolidate.PieceOf(bundle, bundle) || consolidate.PieceOf("The user plays the violin on Sundays.", bundle) {
		t.Fatal("the bundle itself, or another fact, counts as a piece")
	}
}

func TestOverlapIgnoresTheSubject(t *testing.T) {
	if o := consolidate.Overlap("The user loves sailing.", "The user loves knitting."); o >= 0.5 {
		t.Fatalf("two facts sharing only their subject and verb overlap %v", o)
	}
}

// TestTokenBudgetDelaysThePass: the project's daily token budget stops a
// pass between steps; the handler retries it after the reset, and what the
// pass did stays.
func TestTokenBudgetDelaysThePass(t *testing.T) {
	st := sqliteStore(t)
	srv := llmtest.New(t)
	cfg := srv.Config()
	cfg.DailyTokenBudget = 100 // less than one step: the first call spends it
	client, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := consolidate.New(st, client, consolidate.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: context.Background(), st: st, srv: srv}
	f.say("I am vegetarian.", "")
	srv.Enqueue(remember("The user is vegetarian.", "preference"), done())
	_, err = c.Run(f.ctx, consolidate.Request{Project: project, Session: session})
	var be *llm.BudgetError
	if !errors.As(err, &be) {
		t.Fatalf("error %v, want a budget error", err)
	}
	cl := consolidate.Classify(err)
	if runner.IsPermanent(cl) || runner.IsUnavailable(cl) || !strings.Contains(cl.Error(), "retry after") {
		t.Fatalf("classified %v, want a retry after the reset", cl)
	}
	if len(f.liveTexts()) != 1 || f.cursor() != 0 {
		t.Fatalf("after the budget stop: %v, cursor %d", f.liveTexts(), f.cursor())
	}
	ps, _ := st.Passes(f.ctx, memory.PassQuery{Project: project, Status: memory.PassRunning})
	if len(ps) != 1 || ps[0].Steps != 1 {
		t.Fatalf("the pass is not kept to be resumed: %+v", ps)
	}
}

func TestHandlerRefusesOtherEvents(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	h := consolidate.NewHandler(f.c, nil)
	ev := events.New(events.Ref{ProjectID: project, SessionID: session, TurnID: "t1"}, events.TurnStarted{Text: "hi"})
	if err := h.Handle(f.ctx, ev); !runner.IsPermanent(err) {
		t.Fatalf("a turn_started handled as session_idle: %v", err)
	}
	idle := events.NewSessionIdle(events.Ref{ProjectID: project, SessionID: session}, events.SessionIdle{LastActivity: time.Now()})
	if err := h.Handle(f.ctx, idle); err != nil {
		t.Fatalf("an idle session with nothing new: %v", err)
	}
}
