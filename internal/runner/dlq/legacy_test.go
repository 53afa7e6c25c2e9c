package dlq_test

import (
	"context"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/runner/dlq"
	"github.com/engram-memory/engram/pkg/events"
)

// TestReplayOfALetterBeforeTenants: a letter of an event dead-lettered
// before subjects named the tenant (its original subject of the older
// form, which ENGRAM_IN no longer stores) is replayed on the current
// subject of the default tenant, where the body agrees with it.
func TestReplayOfALetterBeforeTenants(t *testing.T) {
	_, js, topo := setup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ev := events.NewSessionIdle(events.Ref{ProjectID: "acme/web", SessionID: "chat 1"}, events.SessionIdle{LastActivity: time.Now()})
	data, _ := events.Encode(ev)
	old := "engram.in.session_idle.acme%2Fweb.chat%201"
	w := dlq.NewWriter(js, topo.Subjects())
	if err := w.Put(ctx, dlq.Letter{Consumer: events.ConsumerConsolidator, Reason: "store refused", Subject: old,
		Stream: events.StreamIn, Sequence: 9, Deliveries: 1, MsgID: ev.ID, Data: data}); err != nil {
		t.Fatal(err)
	}
	if err := dlq.NewStore(js, events.StreamDLQ).Replay(ctx, 1); err != nil {
		t.Fatalf("replay of a letter of the older form: %v", err)
	}
	in, _ := js.Stream(ctx, events.StreamIn)
	r, err := in.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := events.Decode(r.Data)
	if err != nil || got.ID != ev.ID || r.Subject != "engram.in.session_idle.%.acme%2Fweb.chat%201" {
		t.Fatalf("replayed on %s: %v %v", r.Subject, got.ID, err)
	}
	if err := topo.Subjects().Check(r.Subject, got); err != nil {
		t.Fatalf("the replayed event does not pass the workers' check: %v", err)
	}
}
