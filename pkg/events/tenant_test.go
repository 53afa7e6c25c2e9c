package events_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// TestTenantID: tenant_id is optional (absent: the default tenant, and
// left out of the encoding, so events without tenants read and write as
// before), carried by New and Ref, and validated like the project id.
func TestTenantID(t *testing.T) {
	tref := events.Ref{TenantID: "acme", ProjectID: "p", SessionID: "s", TurnID: "t"}
	e := events.NewTurnStarted(tref, events.TurnStarted{Text: "hi"})
	if e.TenantID != "acme" || e.Ref() != tref {
		t.Fatalf("New: %+v", e)
	}
	b, err := events.Encode(e)
	if err != nil || !strings.Contains(string(b), `"tenant_id":"acme"`) {
		t.Fatalf("encode: %s %v", b, err)
	}
	got, err := events.Decode(b)
	if err != nil || got.TenantID != "acme" {
		t.Fatalf("decode: %+v %v", got, err)
	}
	def := events.NewTurnStarted(events.Ref{ProjectID: "p", SessionID: "s", TurnID: "t"}, events.TurnStarted{Text: "hi"})
	if b, err := events.Encode(def); err != nil || strings.Contains(string(b), "tenant_id") {
		t.Fatalf("the default tenant's event names no tenant: %s %v", b, err)
	}
	for name, tenant := range map[string]string{"not UTF-8": "acme-\xff", "too long": strings.Repeat("t", events.MaxIDLen+1)} {
		bad := events.NewTurnStarted(events.Ref{TenantID: tenant, ProjectID: "p", SessionID: "s", TurnID: "t"}, events.TurnStarted{Text: "hi"})
		var fe *events.FieldError
		if err := bad.Validate(); !errors.As(err, &fe) || fe.Field != "tenant_id" {
			t.Fatalf("%s tenant id: %v", name, err)
		}
	}
	if _, err := events.Decode([]byte(`{"id":"x","type":"session_idle","version":1,"occurred_at":"2026-01-01T00:00:00Z",` +
		`"tenant_id":7,"project_id":"p","session_id":"s","payload":{"last_activity":"2026-01-01T00:00:00Z"}}`)); err == nil ||
		!strings.Contains(err.Error(), "tenant_id") {
		t.Fatalf("a tenant_id of the wrong type: %v", err)
	}
}

// TestContextCarriesTheTenant: a context request names the session's
// tenant, and the service sees it in the Ref (the subject names only the
// project and session).
func TestContextCarriesTheTenant(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	_ = eventstest.Setup(t, nc, eventstest.Topology())
	c, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := c.ServeContext(func(_ context.Context, r events.Ref, _ events.ContextRequest) (events.ContextReply, error) {
		return events.ContextReply{Summary: "tenant " + r.TenantID + " project " + r.ProjectID}, nil
	}, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Stop() }()
	for _, tenant := range []string{"acme", ""} {
		got, err := c.Context(context.Background(), events.Ref{TenantID: tenant, ProjectID: "p", SessionID: "s"})
		if err != nil || got.Summary != "tenant "+tenant+" project p" {
			t.Fatalf("tenant %q: %+v %v", tenant, got, err)
		}
	}
}
