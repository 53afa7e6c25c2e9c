package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// A lag read (LastInput, ExtractorLag.TurnEndedPending) whose JetStream API
// request or reply is lost (the server it went through was killed, or the
// stream's leader changed under it) is never answered, and jetstream's
// default timeout does not apply under a context with a deadline: a
// compactor's handler waited so in a direct get for its whole 15-minute
// deadline, holding its event, its lane and the session's lease (the chaos
// suite's clustered run). The read is sent again after an attempt's
// timeout, and answers.
func TestLagReadsRepeatAnUnansweredRequest(t *testing.T) {
	defer events.SetAPIAttempt(200 * time.Millisecond)()
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	eventstest.Setup(t, nc, topo)
	c, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a handler's: far away
	defer cancel()
	r := events.Ref{ProjectID: "acme", SessionID: "s1", TurnID: "t1"}
	sent, err := c.PublishTurnEnded(ctx, r, events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	// A stand-in for the cluster between the worker and the stream: it
	// loses the first request of each kind of API call and relays the rest.
	loss := &eventstest.FirstOfEachKind{}
	lossy := eventstest.LossyJetStream(t, nc, loss.Decide)
	done := make(chan error, 1)
	var pending bool
	var last *jetstream.RawStreamMsg
	go func() {
		st, err := events.Retried(ctx, func(ctx context.Context) (jetstream.Stream, error) { return lossy.Stream(ctx, topo.In.Name) })
		if err != nil {
			done <- err
			return
		}
		if last, err = events.LastInput(ctx, st, topo.Subjects(), events.TypeTurnEnded, "", "acme", "s1"); err != nil {
			done <- err
			return
		}
		pending, err = events.NewExtractorLag(lossy, topo).TurnEndedPending(ctx, "", "acme", "s1")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("lag reads: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("lag reads still waiting for a lost reply after 30 s")
	}
	if last == nil || last.Header.Get(events.HeaderMsgID) != sent.ID {
		t.Fatalf("LastInput read %v, want the turn_ended %s", last, sent.ID)
	}
	if !pending {
		t.Error("a turn_ended nobody consumed reads as not pending")
	}
	if lost, seen := loss.Lost(); lost < 3 {
		t.Errorf("only %d requests lost (%v): the test does not exercise the repeat", lost, seen)
	}
}
