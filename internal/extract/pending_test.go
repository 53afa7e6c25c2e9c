package extract_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// A turn whose prompt carried memories (the platform says so in turn_ended)
// is not judged as one without: its extraction waits for the injector's
// record, which may come after the turn's end (the injector answers first
// and records after; a store failover between the two held the record
// back in a clustered chaos run, and the turn's feedback was lost).
func TestExtractionWaitsForALateInjectionRecord(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		h := extract.NewHandler(f.x, nil)
		a := f.seed(memory.Node{Subkind: memory.Decision, Label: "Builds use Bazel", Confidence: 0.6})
		chats := func() int { return len(f.srv.Chats()) }

		// t1 carried a; its record is not written yet. Through the
		// handler, from the event: a wait (no delivery spent), no model
		// call. The platform's clock says the turn ended an hour ago: the
		// wait is measured on the store's clock, from the first look.
		ev := events.New(events.Ref{ProjectID: project, SessionID: session, TurnID: "t1"}, events.TurnEnded{
			Messages: []events.Message{
				{Role: events.RoleUser, Content: "Build it with Bazel please, as we agreed."},
				{Role: events.RoleAssistant, Content: "Understood, building with Bazel from now on."},
			},
			InjectedNodeIDs: []string{a.ID},
		})
		ev.OccurredAt = time.Now().Add(-time.Hour)
		t1, err := extract.TurnFromEvent(ev)
		if err != nil || !slices.Equal(t1.InjectedNodeIDs, []string{a.ID}) {
			t.Fatalf("TurnFromEvent: %v, injected %v", err, t1.InjectedNodeIDs)
		}
		if err := h.Store(f.ctx, ev); err != nil {
			t.Fatal(err)
		}
		if err := h.Handle(f.ctx, ev); !errors.Is(err, extract.ErrInjectionPending) || !runner.IsWait(err) {
			t.Fatalf("Handle before the record: %v (wait %v), want ErrInjectionPending as a wait", err, runner.IsWait(err))
		}
		if n := chats(); n != 0 {
			t.Fatalf("%d model calls while the record was pending", n)
		}

		// t2 (no memories) comes in the meantime: its span holds t1, and
		// waits too.
		t2 := userTurn("t2", "And run the tests afterwards.")
		if _, err := f.x.HandleTurn(f.ctx, t2); !errors.Is(err, extract.ErrInjectionPending) {
			t.Fatalf("a later turn's span holding t1: %v, want ErrInjectionPending", err)
		}

		// The record lands: the span is extracted and a judged.
		if err := f.st.PutInjection(f.ctx, ref(), "t1", memory.Injection{IDs: []string{a.ID}}, time.Hour); err != nil {
			t.Fatal(err)
		}
		f.srv.Enqueue(reply([]extract.ReplyVerdict{{ID: a.ID, Verdict: "used"}}))
		if err := h.Handle(f.ctx, ev); err != nil {
			t.Fatal(err)
		}
		if n := chats(); n != 1 {
			t.Errorf("%d model calls, want 1", n)
		}
		if got := f.get(a.ID); got.Useful != 1 {
			t.Errorf("the late record's memory: useful %d, want 1", got.Useful)
		}
		if _, err := f.x.ExtractTurn(f.ctx, t2); err != nil {
			t.Fatalf("t2 after its span was extracted: %v", err)
		}
	})
}

// The mark is the transcript consumer's too: a span that another turn's
// event extracts finds a turn the transcript consumer stored, and waits.
func TestTranscriptConsumerMarksAnInjectedTurn(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		a := f.seed(memory.Node{Subkind: memory.Decision, Label: "Builds use Bazel", Confidence: 0.6})
		t0 := userTurn("t0", "Hello there, let us start on the build system work today.")
		f.srv.Enqueue(reply(nil))
		if _, err := f.x.HandleTurn(f.ctx, t0); err != nil {
			t.Fatal(err)
		}
		t1 := userTurn("t1", "Build it with Bazel please.")
		t1.InjectedNodeIDs = []string{a.ID}
		if _, err := f.x.StoreTurn(f.ctx, t1); err != nil {
			t.Fatal(err)
		}
		// t0 redelivered: its drain finds t1.
		if _, err := f.x.ExtractTurn(f.ctx, t0); !errors.Is(err, extract.ErrInjectionPending) {
			t.Fatalf("t0's redelivery with t1 stored by the transcript consumer: %v, want ErrInjectionPending", err)
		}
	})
}

// A record that never comes (the injector killed between its answer and
// the record, whose redelivery came after the reply deadline) is waited
// for Config.InjectionWait from the first look; then the span goes on,
// judging nothing of that turn, and says so.
func TestExtractionGivesUpOnAnInjectionRecordThatNeverComes(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open, func(c *extract.Config) { c.InjectionWait = time.Second })
		a := f.seed(memory.Node{Subkind: memory.Decision, Label: "Builds use Bazel", Confidence: 0.6})
		t3 := userTurn("t3", "Deploy it tomorrow with the Bazel build.")
		t3.InjectedNodeIDs = []string{a.ID}
		if _, err := f.x.HandleTurn(f.ctx, t3); !errors.Is(err, extract.ErrInjectionPending) {
			t.Fatalf("first look: %v, want ErrInjectionPending", err)
		}
		if _, err := f.x.ExtractTurn(f.ctx, t3); !errors.Is(err, extract.ErrInjectionPending) {
			t.Fatalf("within the wait: %v, want ErrInjectionPending", err)
		}
		time.Sleep(1200 * time.Millisecond)
		// The model says a was used: without a record nothing is judged.
		f.srv.Enqueue(reply([]extract.ReplyVerdict{{ID: a.ID, Verdict: "used"}}))
		res, err := f.x.ExtractTurn(f.ctx, t3)
		if err != nil {
			t.Fatalf("past the wait: %v", err)
		}
		if res.Unjudged != 1 || res.Spans != 1 {
			t.Errorf("past the wait: %d unjudged turns, %d spans; want 1, 1", res.Unjudged, res.Spans)
		}
		if got := f.get(a.ID); got.Useful != 0 || got.Unhelpful != 0 {
			t.Errorf("judged without a record: useful %d unhelpful %d", got.Useful, got.Unhelpful)
		}
	})
}
