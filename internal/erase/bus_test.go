package erase

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestAskServe: an erasure asked on the bus is done by the responder's
// Eraser and answered with its receipt; an invalid scope is ErrInvalid;
// nobody answering is ErrNoResponder; a failed erasure's error reaches the
// log without the scope's ids.
func TestAskServe(t *testing.T) {
	b := startBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subject := Subject(b.topo.Prefix)
	if _, err := Ask(ctx, b.nc, subject, Request{Scope: Scope{Tenant: "acme", Project: "p"}}); !errors.Is(err, ErrNoResponder) {
		t.Fatalf("Ask with nobody answering: %v", err)
	}
	st := storetest.OpenSQLite(t)
	ref := memory.SessionRef{Tenant: "acme", Project: "user-7", Session: "s"}
	if _, _, err := st.AppendTranscript(ctx, ref, "t1", []memory.Message{{Role: memory.RoleUser, Content: "remember my birthday please"}}); err != nil {
		t.Fatal(err)
	}
	var logged []error
	r, err := Serve(b.nc, subject, New(st, WithBus(NewBus(b.js, b.topo))), func(err error) { logged = append(logged, err) })
	if err != nil {
		t.Fatal(err)
	}
	receipt, err := Ask(ctx, b.nc, subject, Request{Scope: Scope{Tenant: "acme", Project: "user-7"}, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if receipt.Store.Messages != 1 || receipt.Verify == nil || !receipt.Complete() || receipt.Scope.Project != "user-7" {
		t.Fatalf("receipt %+v", receipt)
	}
	if m, _ := st.Messages(ctx, ref, 0, 0); len(m) != 0 {
		t.Fatal("the transcript is still there")
	}
	if _, err := Ask(ctx, b.nc, subject, Request{Scope: Scope{Tenant: "acme", Session: "s"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an invalid scope: %v", err)
	}
	// A store that fails: the error is logged without the ids.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Ask(ctx, b.nc, subject, Request{Scope: Scope{Tenant: "acme-corp", Project: "user-1234"}})
	if err == nil {
		t.Fatal("an erasure on a closed store succeeded")
	}
	if len(logged) != 1 || strings.Contains(logged[0].Error(), "user-1234") || strings.Contains(logged[0].Error(), "acme-corp") {
		t.Fatalf("logged %v", logged)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := Ask(ctx, b.nc, subject, Request{Scope: Scope{Tenant: "acme", Project: "p"}}); !errors.Is(err, ErrNoResponder) {
		t.Fatalf("Ask after Stop: %v", err)
	}
}
