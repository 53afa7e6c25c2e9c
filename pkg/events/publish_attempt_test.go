package events_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// A JetStream publish whose request or acknowledgement is lost (the server
// it went through was killed, or the stream's leader changed under it) is
// never answered. Publish must not wait for it until the caller's context
// ends (a worker's handler context lasts 15 minutes, during which the
// runner's in-progress heartbeats hold the event and the session's lease
// is renewed: the chaos suite's clustered run found an extractor stuck so
// in a memory_changed publish after a NATS node was killed, its session's
// other turns retried as busy towards dead letters). It repeats the
// attempt, with the same Nats-Msg-Id, so the stream stores it once.
func TestPublishRepeatsAnUnansweredAttempt(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	// No stream: a stand-in for the stream's leader that loses the first
	// request and acknowledges the next ones.
	var mu sync.Mutex
	var ids []string
	sub, err := nc.Subscribe("engram.out.>", func(m *nats.Msg) {
		mu.Lock()
		ids = append(ids, m.Header.Get(events.HeaderMsgID))
		n := len(ids)
		mu.Unlock()
		if n > 1 {
			_ = m.Respond([]byte(`{"stream":"ENGRAM_OUT","seq":1}`))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c, err := events.NewClient(nc, events.WithPublishAttemptTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// A context that outlives the test: the publish must come back on its
	// own.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	e := samples()[5]
	go func() { done <- c.Publish(ctx, e) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("publish still waiting for the lost acknowledgement after 30s")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] != e.ID || ids[1] != e.ID {
		t.Fatalf("requests with ids %v, want the event id %s twice", ids, e.ID)
	}
}

// The caller's deadline still bounds the whole publish.
func TestPublishAttemptsEndWithTheCallersContext(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	sub, err := nc.Subscribe("engram.out.>", func(*nats.Msg) {}) // never answers
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c, err := events.NewClient(nc, events.WithPublishAttemptTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	if err := c.Publish(ctx, samples()[5]); err == nil {
		t.Fatal("publish without an acknowledgement succeeded")
	}
	if ctx.Err() == nil {
		t.Fatal("publish gave up before the caller's deadline")
	}
	if _, err := events.NewClient(nc, events.WithPublishAttemptTimeout(0)); err == nil {
		t.Fatal("zero publish attempt timeout accepted")
	}
}
