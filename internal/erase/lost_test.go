package erase

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
	"github.com/engram-memory/engram/pkg/memory"
)

// An erasure's stream requests whose requests or replies are lost (a NATS
// node killed under them) are sent again after an attempt's timeout
// instead of holding the erase service for its 30-minute deadline; a pull
// that went unanswered is not taken for the end of the stream; a secure
// delete whose reply was lost counts the message it deleted.
func TestBusEraseRepeatsLostRequests(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	c, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute) // the service's
	defer cancel()
	for _, s := range []string{"s1", "s2"} {
		if _, err := c.PublishTurnStarted(ctx, events.Ref{ProjectID: "acme", SessionID: s, TurnID: "t1"}, events.TurnStarted{Text: "hello " + s}); err != nil {
			t.Fatal(err)
		}
	}
	// A relay that loses the first request of each kind of API call and
	// passes the others on (the server answers the requester directly).
	var mu sync.Mutex
	seen := map[string]int{}
	lost := 0
	sub, err := nc.Subscribe("LOSSY.API.>", func(m *nats.Msg) {
		rest := strings.TrimPrefix(m.Subject, "LOSSY.API.")
		kind := strings.Join(strings.SplitN(rest, ".", 3)[:2], ".")
		mu.Lock()
		seen[kind]++
		first := seen[kind] == 1
		if first {
			lost++
		}
		mu.Unlock()
		reply := m.Reply
		switch {
		case first && kind == "STREAM.MSG":
			reply = "LOST.reply" // the delete is done; its answer is lost
		case first:
			return // the request is lost
		}
		_ = nc.PublishMsg(&nats.Msg{Subject: "$JS.API." + rest, Reply: reply, Data: m.Data, Header: m.Header})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	lossy, err := jetstream.NewWithAPIPrefix(nc, "LOSSY.API")
	if err != nil {
		t.Fatal(err)
	}
	b := NewBus(lossy, topo)
	b.Bucket, b.Streams, b.Attempt = "", []string{topo.In.Name}, 200*time.Millisecond
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
	if n := r.counts[topo.In.Name]; n != 1 {
		t.Errorf("%d messages erased, want s1's one (%v)", n, r.counts)
	}
	// What is left in the stream, read on a reliable path: s2's only.
	st, err := js.Stream(ctx, topo.In.Name)
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
	mu.Lock()
	defer mu.Unlock()
	if lost < 3 {
		t.Errorf("only %d requests lost (%v): the test does not exercise the repeats", lost, seen)
	}
}

// A stream whose pulls are never answered fails the scan, rather than
// ending it as if it had read everything.
func TestBusScanFailsWhenPullsGoUnanswered(t *testing.T) {
	defer func(n int) { maxSilentPulls = n }(maxSilentPulls)
	maxSilentPulls = 2
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	eventstest.Setup(t, nc, topo)
	c, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if _, err := c.PublishTurnStarted(ctx, events.Ref{ProjectID: "acme", SessionID: "s1", TurnID: "t1"}, events.TurnStarted{Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	sub, err := nc.Subscribe("LOSSY.API.>", func(m *nats.Msg) {
		rest := strings.TrimPrefix(m.Subject, "LOSSY.API.")
		if strings.HasPrefix(rest, "CONSUMER.MSG.NEXT.") {
			return // every pull lost
		}
		_ = nc.PublishMsg(&nats.Msg{Subject: "$JS.API." + rest, Reply: m.Reply, Data: m.Data, Header: m.Header})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	lossy, err := jetstream.NewWithAPIPrefix(nc, "LOSSY.API")
	if err != nil {
		t.Fatal(err)
	}
	b := NewBus(lossy, topo)
	b.Bucket, b.Streams, b.Attempt = "", []string{topo.In.Name}, 200*time.Millisecond
	counts, _, err := b.erase(ctx, memory.EraseScope{Project: "acme", Session: "s1"}, nil, func(string) {})
	if err == nil || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("erase with every pull lost: %v (counts %v), want the scan's failure", err, counts)
	}
}
