package erase

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// A request on the bus is read strictly: a key the request does not have
// is refused, not dropped. The probe of 2026-12-06 sent
// {"scope":{"tenant":"acme","project_id":"user-42"}} (the events' name of
// the field) to a running engram serve: the unknown key was dropped, the
// scope became the whole tenant, and every project of tenant acme was
// erased. A typo must never widen an erasure.
func TestServeRefusesUnknownKeys(t *testing.T) {
	b := startBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subject := Subject(b.topo.Prefix)
	st := storetest.OpenSQLite(t)
	keep := []memory.SessionRef{{Tenant: "acme", Project: "user-7", Session: "s"}, {Tenant: "acme", Project: "user-42", Session: "s"}}
	for _, ref := range keep {
		if _, _, err := st.AppendTranscript(ctx, ref, "t1", []memory.Message{{Role: memory.RoleUser, Content: "keep me, " + ref.Project}}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Serve(b.nc, subject, New(st, WithBus(NewBus(b.js, b.topo))), func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Stop() }()
	for _, body := range []string{
		`{"scope":{"tenant":"acme","project_id":"user-42"}}`,
		`{"scope":{"tenant":"acme","projcet":"user-42"}}`,
		`{"scope":{"tenant":"acme"},"project":"user-42"}`,
		`{"scope":{"tenant":"acme","project":"user-42"}} {"scope":{"tenant":"acme"}}`,
	} {
		m, err := b.nc.RequestWithContext(ctx, subject, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var rep Reply
		if err := json.Unmarshal(m.Data, &rep); err != nil {
			t.Fatal(err)
		}
		if !rep.Invalid || rep.Receipt != nil {
			t.Errorf("%s: reply %s, want refused as invalid", body, m.Data)
		}
	}
	for _, ref := range keep {
		if msgs, err := st.Messages(ctx, ref, 0, 0); err != nil || len(msgs) != 1 {
			t.Errorf("%s: %d messages (%v), want the transcript kept", ref, len(msgs), err)
		}
	}
}
