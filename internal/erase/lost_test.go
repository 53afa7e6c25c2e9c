package erase

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
	"github.com/engram-memory/engram/pkg/memory"
)

// lossyBus publishes a turn_started for each of sessions (project acme)
// and returns a Bus on ENGRAM_IN whose requests go through a relay that
// asks decide (eventstest.LossyJetStream), a reliable handle on the same
// server, and a context as long as the erase service's.
func lossyBus(t *testing.T, decide func(string) eventstest.Loss, sessions ...string) (*Bus, jetstream.JetStream, context.Context) {
	t.Helper()
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	c, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	t.Cleanup(cancel)
	for _, s := range sessions {
		if _, err := c.PublishTurnStarted(ctx, events.Ref{ProjectID: "acme", SessionID: s, TurnID: "t1"}, events.TurnStarted{Text: "hello " + s}); err != nil {
			t.Fatal(err)
		}
	}
	b := NewBus(eventstest.LossyJetStream(t, nc, decide), topo)
	b.Bucket, b.Streams, b.Attempt = "", []string{topo.In.Name}, 200*time.Millisecond
	return b, js, ctx
}

// An erasure's stream requests whose requests or replies are lost (a NATS
// node killed under them) are sent again after an attempt's timeout
// instead of holding the erase service for its 30-minute deadline; a pull
// that went unanswered is not taken for the end of the stream; a secure
// delete whose reply was lost counts the message it deleted.
func TestBusEraseRepeatsLostRequests(t *testing.T) {
	// The first request of each kind is lost; the first delete reaches the
	// server and its answer is lost.
	loss := &eventstest.FirstOfEachKind{How: func(kind string) eventstest.Loss {
		if kind == "STREAM.MSG" {
			return eventstest.LoseReply
		}
		return eventstest.LoseRequest
	}}
	b, js, ctx := lossyBus(t, loss.Decide, "s1", "s2")
	type result struct {
		counts map[string]int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		counts, _, err := b.erase(ctx, memory.EraseScope{Project: "acme", Session: "s1"}, nil, func(string) {})
		done <- result{counts, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the erasure still waits for a lost reply after 60 s")
	}
	if r.err != nil {
		t.Fatalf("erase: %v", r.err)
	}
	in := b.Streams[0]
	if n := r.counts[in]; n != 1 {
		t.Errorf("%d messages erased, want s1's one (%v)", n, r.counts)
	}
	// What is left in the stream, read on a reliable path: s2's only.
	st, err := js.Stream(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("%d messages left, want s2's one", info.State.Msgs)
	}
	if lost, seen := loss.Lost(); lost < 3 {
		t.Errorf("only %d requests lost (%v): the test does not exercise the repeats", lost, seen)
	}
}

// A stream whose pulls are never answered fails the scan, rather than
// ending it as if it had read everything.
func TestBusScanFailsWhenPullsGoUnanswered(t *testing.T) {
	defer func(n int) { maxSilentPulls = n }(maxSilentPulls)
	maxSilentPulls = 2
	b, _, ctx := lossyBus(t, func(subject string) eventstest.Loss {
		if strings.HasPrefix(subject, "CONSUMER.MSG.NEXT.") {
			return eventstest.LoseRequest // every pull lost
		}
		return eventstest.Pass
	}, "s1")
	counts, _, err := b.erase(ctx, memory.EraseScope{Project: "acme", Session: "s1"}, nil, func(string) {})
	if err == nil || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("erase with every pull lost: %v (counts %v), want the scan's failure", err, counts)
	}
}
