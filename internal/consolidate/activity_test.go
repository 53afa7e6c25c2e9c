package consolidate_test

import (
	"context"
	"testing"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// TestActivityIsTheTenants: a turn_started of another tenant on the same
// project and session ids (the same subject) is not this session's.
func TestActivityIsTheTenants(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	bus, err := events.NewClient(nc, events.WithJetStream(js))
	if err != nil {
		t.Fatal(err)
	}
	act := consolidate.NewStreamActivity(js, topo.In.Name, topo.Subjects())
	ctx := context.Background()
	if _, err := bus.PublishTurnStarted(ctx, events.Ref{ProjectID: "p", SessionID: "s", TurnID: "t1"}, events.TurnStarted{Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if at, err := act.LastTurnStarted(ctx, "", "p", "s"); err != nil || at.IsZero() {
		t.Fatalf("the default tenant's turn: %v %v", at, err)
	}
	if _, err := bus.PublishTurnStarted(ctx, events.Ref{TenantID: "acme", ProjectID: "p", SessionID: "s", TurnID: "t1"}, events.TurnStarted{Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if at, err := act.LastTurnStarted(ctx, "acme", "p", "s"); err != nil || at.IsZero() {
		t.Fatalf("acme's turn: %v %v", at, err)
	}
	if at, err := act.LastTurnStarted(ctx, "globex", "p", "s"); err != nil || !at.IsZero() {
		t.Fatalf("another tenant's turn counted for globex: %v %v", at, err)
	}
}
