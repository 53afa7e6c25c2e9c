package consolidate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestParkAndResume: a turn_started published on the bus (which every
// replica reads) during a pass parks it with its ledger; the next idle
// resumes it where it stopped.
func TestParkAndResume(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	bus, err := events.NewClient(nc, events.WithJetStream(js))
	if err != nil {
		t.Fatal(err)
	}
	act := consolidate.NewStreamActivity(js, topo.In.Name, topo.Subjects())
	f := newFixture(t, sqliteStore(t), consolidate.WithActivity(act))
	evRef := events.Ref{ProjectID: project, SessionID: session}
	evRef.TurnID = "turn-1"
	if _, err := bus.PublishTurnStarted(f.ctx, evRef, events.TurnStarted{Text: "I play tennis and squash."}); err != nil {
		t.Fatal(err)
	}
	f.say("I play tennis and squash.", "Fun!")
	idle := time.Now()

	f.srv.Enqueue(remember("The user plays tennis.", "pattern"),
		llmtest.Func(func(api.ChatRequest) llmtest.Reply {
			// The user is back while the model works on step 2.
			back := evRef
			back.TurnID = "turn-2"
			if _, err := bus.PublishTurnStarted(context.Background(), back, events.TurnStarted{Text: "And padel!"}); err != nil {
				t.Error(err)
			}
			return remember("The user plays squash.", "pattern")
		}))
	res, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session, IdleSince: idle})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != consolidate.VerdictParked || res.Pass.Status != memory.PassParked || res.Pass.Steps != 2 {
		t.Fatalf("result %+v", res)
	}
	if f.cursor() != 0 || len(f.pub.done(t)) != 0 {
		t.Fatal("a parked pass moved the cursor or reported done")
	}
	if len(f.liveTexts()) != 2 {
		t.Fatalf("what the parked pass stored: %v", f.liveTexts())
	}
	// A stale idle event (older than the new turn) does not resume it.
	if res, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session, IdleSince: idle}); err != nil || res.Verdict != consolidate.VerdictParked {
		t.Fatalf("stale idle: %+v %v", res, err)
	}
	n := len(f.srv.ChatRequests())
	if n != 2 {
		t.Fatalf("%d model calls", n)
	}

	f.say("And padel!", "")
	f.srv.Enqueue(remember("The user plays padel.", "pattern"), done())
	res2, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session, IdleSince: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Verdict != consolidate.VerdictDone || res2.Pass.ID != res.Pass.ID || res2.Pass.Steps != 4 || res2.Outcome.Stored != 3 {
		t.Fatalf("resumed %+v", res2)
	}
	resumed := f.trailing(n)
	if !strings.Contains(resumed, "Steps used: 2 of 12") || !strings.Contains(f.srv.ChatRequests()[n].Messages[1].Content, "And padel!") {
		t.Fatalf("the resumed pass lost its ledger or does not read the new turn:\n%s", resumed)
	}
	msgs, _ := f.st.Messages(f.ctx, ref(), 0, 0)
	if f.cursor() != msgs[len(msgs)-1].ID {
		t.Fatalf("cursor %d", f.cursor())
	}
	if ds := f.pub.done(t); len(ds) != 1 || ds[0].Stored != 3 || ds[0].Steps != 4 {
		t.Fatalf("consolidation_done %+v", ds)
	}
}

func TestJournalAndUndo(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b.Open(t))
		wrong := f.seed(memory.Node{Subkind: memory.Observation, Label: "The user is allergic to cats."})
		city := f.seed(memory.Node{Subkind: memory.Observation, Label: "The user lives in Oslo."})
		f.say("I'm not allergic to cats at all. I moved to Bergen. I love sailing and knitting.", "")
		f.srv.Enqueue(
			callOn(t, consolidate.ToolForget, wrong.Label, map[string]any{"reason": "the user said it is not true"}),
			callOn(t, consolidate.ToolRevise, city.Label, map[string]any{"text": "The user lives in Bergen.", "reason": "moved"}),
			call(consolidate.ToolRemember, map[string]any{"text": "The user loves sailing.", "kind": "preference", "topic": "sailing", "reason": "stated"}),
			remember("The user loves knitting.", "preference"),
			done())
		res := f.run()
		if res.Verdict != consolidate.VerdictDone {
			t.Fatalf("result %+v", res)
		}
		if ds := f.pub.done(t); len(ds) != 1 || ds[0].Stored != 2 || ds[0].Revised != 1 || ds[0].Forgotten != 1 || ds[0].Linked != 1 {
			t.Fatalf("consolidation_done %+v", ds)
		}
		rec, err := f.st.GetPass(f.ctx, memory.ProjectRef{Project: ""}, res.Pass.ID)
		if err != nil {
			t.Fatal(err)
		}
		var ops []string
		for _, e := range rec.Entries {
			ops = append(ops, string(e.Op))
		}
		if strings.Join(ops, ",") != "forget,revise,remember,remember,link,remember" {
			t.Fatalf("journal ops %v", ops)
		}
		if e := rec.Entries[0]; e.Before == nil || e.Before.Label != wrong.Label || e.After == nil || e.After.ArchivedAt.IsZero() || e.Reason != "the user said it is not true" {
			t.Fatalf("forget entry %+v", e)
		}
		if e := rec.Entries[1]; e.Before == nil || e.Before.ID != city.ID || e.After == nil || e.After.Label != "The user lives in Bergen." {
			t.Fatalf("revise entry %+v", e)
		}
		sailing, knitting := rec.Entries[2].NodeID, rec.Entries[5].NodeID
		var out strings.Builder
		consolidate.WriteJournal(&out, rec)
		for _, want := range []string{"pass " + rec.ID, "finished (done)", "forget   [" + wrong.ID + "]", "reason: moved", `-> [`, `"The user lives in Bergen."`} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("journal lacks %q:\n%s", want, out.String())
			}
		}

		// A later turn used one of the pass's memories: undo keeps it.
		if err := f.st.Touch(f.ctx, []string{knitting}); err != nil {
			t.Fatal(err)
		}
		rep, err := consolidate.Undo(f.ctx, f.st, memory.ProjectRef{Project: ""}, rec.ID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if f.get(wrong.ID).ArchivedAt.IsZero() == false {
			t.Error("the forgotten fact is not restored")
		}
		if c := f.get(city.ID); !c.Live() {
			t.Errorf("the revised fact is not reopened: %+v", c)
		}
		if f.get(res.Pass.Entries[1].NewID).ArchivedAt.IsZero() {
			t.Error("the revision is not removed")
		}
		if f.get(sailing).ArchivedAt.IsZero() {
			t.Error("an added memory nobody used is not removed")
		}
		if !f.get(knitting).ArchivedAt.IsZero() {
			t.Error("an added memory a later turn used was removed")
		}
		if len(rep.Kept) != 1 || !strings.Contains(rep.Kept[0], knitting) || !strings.Contains(rep.Kept[0], "used since by a later turn") {
			t.Fatalf("kept %v", rep.Kept)
		}
		texts := f.liveTexts()
		for _, want := range []string{"The user is allergic to cats.", "The user lives in Oslo.", "The user loves knitting."} {
			if _, ok := texts[want]; !ok {
				t.Errorf("after undo %q is not live: %v", want, texts)
			}
		}
		if len(texts) != 3 {
			t.Errorf("after undo: %v", texts)
		}
		edges, err := f.st.Edges(f.ctx, sailing)
		if err != nil || len(edges) != 0 {
			t.Errorf("the topic link is not undone: %v %v", edges, err)
		}
		if _, err := consolidate.Undo(f.ctx, f.st, memory.ProjectRef{Project: project}, rec.ID, time.Now()); err == nil {
			t.Error("a second undo was accepted")
		}
		again, _ := f.st.GetPass(f.ctx, memory.ProjectRef{Project: project}, rec.ID)
		if again.Status != memory.PassUndone || len(again.UndoNotes) != 1 {
			t.Errorf("undone pass %+v", again)
		}
		list, err := f.st.Passes(f.ctx, memory.PassQuery{Project: project, Session: session})
		if err != nil || len(list) != 1 {
			t.Fatalf("history %v %v", list, err)
		}
	})
}

// TestUndoKeepsWhatALaterTurnFoundUseful: the extractor's verdict "used"
// on a later turn keeps a memory the pass added; "ignored" does not.
func TestUndoKeepsWhatALaterTurnFoundUseful(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	f.say("I speak Dutch and I collect stamps.", "")
	f.srv.Enqueue(remember("The user speaks Dutch.", "observation"), remember("The user collects stamps.", "pattern"), done())
	res := f.run()
	dutch, stamps := res.Pass.Entries[0].NodeID, res.Pass.Entries[1].NodeID
	if err := f.st.ApplyFeedback(f.ctx, map[string]memory.Verdict{dutch: memory.VerdictUsed, stamps: memory.VerdictIgnored}); err != nil {
		t.Fatal(err)
	}
	rep, err := consolidate.Undo(f.ctx, f.st, memory.ProjectRef{Project: project}, res.Pass.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !f.get(dutch).ArchivedAt.IsZero() || f.get(stamps).ArchivedAt.IsZero() {
		t.Fatalf("after undo: dutch archived %v, stamps archived %v; report %+v", f.get(dutch).ArchivedAt, f.get(stamps).ArchivedAt, rep)
	}
}

// lossyStore applies an Upsert and then reports the store unavailable, as
// a connection dropped after the write reached the server.
type lossyStore struct {
	memory.Store
	drop bool
}

func (s *lossyStore) Upsert(ctx context.Context, n memory.Node) (memory.UpsertResult, error) {
	r, err := s.Store.Upsert(ctx, n)
	if err == nil && s.drop {
		s.drop = false
		return memory.UpsertResult{}, fmt.Errorf("%w: connection reset after the write", memory.ErrUnavailable)
	}
	return r, err
}

// TestWriteCutOffIsJournaled: a write whose outcome the pass never learnt
// is in the journal as pending, and undo still reverts it.
func TestWriteCutOffIsJournaled(t *testing.T) {
	st := &lossyStore{Store: sqliteStore(t), drop: true}
	f := newFixture(t, st)
	f.say("I have two dogs.", "")
	f.srv.Enqueue(remember("The user has two dogs.", "observation"))
	if _, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session}); !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("error %v, want the store outage", err)
	}
	ps, err := st.Passes(f.ctx, memory.PassQuery{Project: project, Session: session})
	if err != nil || len(ps) != 1 || len(ps[0].Entries) != 1 || !ps[0].Entries[0].Pending {
		t.Fatalf("journal after the cut: %+v %v", ps, err)
	}
	dogs := ps[0].Entries[0].NodeID
	if f.get(dogs).Label != "The user has two dogs." {
		t.Fatal("the write did not reach the store")
	}
	f.srv.Enqueue(done())
	res := f.run()
	if res.Verdict != consolidate.VerdictDone {
		t.Fatalf("resumed: %+v", res)
	}
	var out strings.Builder
	consolidate.WriteJournal(&out, res.Pass)
	if !strings.Contains(out.String(), "(cut off: may not have been applied)") {
		t.Errorf("journal:\n%s", out.String())
	}
	if _, err := consolidate.Undo(f.ctx, st, memory.ProjectRef{Project: project}, res.Pass.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if f.get(dogs).ArchivedAt.IsZero() {
		t.Fatal("undo did not remove the memory whose write was cut off")
	}
}
