package extract_test

import (
	"errors"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/internal/runner"
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
		a := f.seed(memory.Node{Subkind: memory.Decision, Label: "Builds use Bazel", Confidence: 0.6})
		chats := func() int { return len(f.srv.Chats()) }

		// t1 carried a; its record is not written yet.
		t1 := userTurn("t1", "Build it with Bazel please.")
		t1.Messages[0].CreatedAt = time.Now()
		t1.InjectedNodeIDs = []string{a.ID}
		if _, err := f.x.StoreTurn(f.ctx, t1); err != nil {
			t.Fatal(err)
		}
		_, err := f.x.ExtractTurn(f.ctx, t1)
		if !errors.Is(err, extract.ErrInjectionPending) || !runner.IsWait(extract.Classify(err)) {
			t.Fatalf("ExtractTurn before the record: %v (wait %v), want ErrInjectionPending, a wait", err, runner.IsWait(extract.Classify(err)))
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
		if _, err := f.x.ExtractTurn(f.ctx, t1); err != nil {
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

		// A record that never comes is waited for InjectionWait at most
		// after the turn's end.
		t3 := userTurn("t3", "Deploy it tomorrow.")
		t3.Messages[0].CreatedAt = time.Now().Add(-extract.InjectionWait - time.Second)
		t3.InjectedNodeIDs = []string{a.ID}
		f.srv.Enqueue(reply(nil))
		if _, err := f.x.HandleTurn(f.ctx, t3); err != nil {
			t.Fatalf("a turn past InjectionWait: %v", err)
		}
		if n := chats(); n != 2 {
			t.Errorf("%d model calls, want 2", n)
		}
		if got := f.get(a.ID); got.Useful != 1 || got.Unhelpful != 0 {
			t.Errorf("judged without a record: useful %d unhelpful %d", got.Useful, got.Unhelpful)
		}
	})
}
