package mcptool

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// recorder is a Publisher that keeps what it is given (and fails when
// told to).
type recorder struct {
	evs  []events.Envelope
	fail bool
}

func (r *recorder) Publish(_ context.Context, e events.Envelope) error {
	if r.fail {
		return errors.New("bus down")
	}
	if err := e.Validate(); err != nil {
		return err
	}
	r.evs = append(r.evs, e)
	return nil
}

// TestEditsPublishMemoryChanged: a call that changes memory publishes one
// memory_changed in the caller's project and session with every change
// (a read-only call publishes nothing; a failed publish fails no call).
func TestEditsPublishMemoryChanged(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite)
	rec := &recorder{}
	WithPublisher(rec)(f.tool)
	f.run(shop, Op{Op: OpRecall, Query: "stripe"}, Op{Op: OpStats})
	if len(rec.evs) != 0 {
		t.Fatalf("a read-only call published %+v", rec.evs)
	}
	rs := f.run(shop,
		Op{Op: OpUpdate, ID: f.ids["stripe"], Label: str("Stripe Checkout, hosted page")},
		Op{Op: OpForget, ID: f.ids["webhook"], Reason: "fixed"},
		Op{Op: OpRestore, ID: f.ids["webhook"]},
		Op{Op: OpLink, From: f.ids["stripe"], To: f.ids["pnpm"], Relation: string(memory.RelatesTo)},
		Op{Op: OpForget, ID: "no-such-id", Reason: "x"})
	if !rs[0].OK || !rs[1].OK || !rs[2].OK || !rs[3].OK || rs[4].OK {
		t.Fatalf("results: %+v", rs)
	}
	if len(rec.evs) != 1 {
		t.Fatalf("%d events, want one for the call", len(rec.evs))
	}
	ev := rec.evs[0]
	mc, err := events.PayloadAs[events.MemoryChanged](ev)
	if err != nil || ev.ProjectID != "shop" || ev.SessionID != "s1" {
		t.Fatalf("event %+v: %v", ev, err)
	}
	want := []events.Change{
		{ID: f.ids["stripe"], Kind: events.ChangeUpdated},
		{ID: f.ids["webhook"], Kind: events.ChangeArchived},
		{ID: f.ids["webhook"], Kind: events.ChangeRestored},
		{ID: f.ids["stripe"], Kind: events.ChangeLinked},
		{ID: f.ids["pnpm"], Kind: events.ChangeLinked},
	}
	if !slices.Equal(mc.Changes, want) {
		t.Fatalf("changes %+v, want %+v", mc.Changes, want)
	}
	rec.fail = true
	if r := f.run(shop, Op{Op: OpForget, ID: f.ids["stripe"], Reason: "gone"})[0]; !r.OK {
		t.Fatalf("a failed publish failed the call: %+v", r)
	}
}

// stalled is a Publisher whose stream never answers: it waits for its
// context, as events.Client.Publish does while it re-sends.
type stalled struct{ deadline bool }

func (s *stalled) Publish(ctx context.Context, _ events.Envelope) error {
	_, s.deadline = ctx.Deadline()
	<-ctx.Done()
	return ctx.Err()
}

// TestPublishIsBoundedWhenTheBusDoesNotAnswer: a call whose caller has no
// deadline (MCP over stdio, a console request) comes back with its changes
// made when memory_changed cannot be published, instead of waiting for
// ever on a stream that does not answer.
func TestPublishIsBoundedWhenTheBusDoesNotAnswer(t *testing.T) {
	defer func(d time.Duration) { publishWithin = d }(publishWithin)
	publishWithin = 200 * time.Millisecond
	f := newFixture(t, storetest.OpenSQLite)
	pub := &stalled{}
	WithPublisher(pub)(f.tool)
	done := make(chan Result, 1)
	go func() { done <- f.run(shop, Op{Op: OpForget, ID: f.ids["stripe"], Reason: "gone"})[0] }()
	select {
	case r := <-done:
		if !r.OK {
			t.Fatalf("the call failed: %+v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call still waits for the publish after 30 s")
	}
	if !pub.deadline {
		t.Error("the publish was given a context without a deadline")
	}
}
