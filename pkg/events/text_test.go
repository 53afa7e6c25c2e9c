package events_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/events"
)

// Bytes the JSON decoder would replace with U+FFFD are refused before
// decoding, so two distinct raw ids never decode to one.
func TestDecodeRefusesWhatWouldBecomeFFFD(t *testing.T) {
	base, err := events.Encode(events.NewSessionIdle(events.Ref{ProjectID: "tenant-x", SessionID: "s"}, events.SessionIdle{LastActivity: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}))
	if err != nil {
		t.Fatal(err)
	}
	with := func(old, repl string) []byte { return []byte(strings.Replace(string(base), old, repl, 1)) }
	for name, data := range map[string][]byte{
		"tenant-\\xff":      with("tenant-x", "tenant-\xff"),
		"tenant-\\xfe":      with("tenant-x", "tenant-\xfe"),
		"truncated rune":    with("tenant-x", "tenant-\xe2\x82"),
		"lone high escape":  with("tenant-x", `tenant-\ud800`),
		"lone low escape":   with("tenant-x", `tenant-\udcff`),
		"high then no low":  with("tenant-x", `tenant-\ud800\u0041`),
		"outside a string?": with(`"version":1`, `"version":1,"x\udfff":1`),
	} {
		if _, err := events.Decode(data); !errors.Is(err, events.ErrInvalidEvent) ||
			!(strings.Contains(err.Error(), "UTF-8") || strings.Contains(err.Error(), "surrogate")) {
			t.Errorf("%s: Decode = %v, want an invalid-event error naming UTF-8 or the surrogate", name, err)
		}
	}
	for name, data := range map[string][]byte{
		"pair":          with("tenant-x", `tenant-\ud83d\ude00`),
		"U+FFFD itself": with("tenant-x", "tenant-\uFFFD"),
		"escaped \\u":   with("tenant-x", `tenant-\\ud800`),
		"plain escape":  with("tenant-x", `tenant-\u00e9`),
	} {
		if _, err := events.Decode(data); err != nil {
			t.Errorf("%s: Decode = %v, want ok", name, err)
		}
	}
}

func TestSubjectsCheck(t *testing.T) {
	s := events.Subjects{}
	e := events.NewTurnStarted(events.Ref{ProjectID: "acme/web", SessionID: "chat 1", TurnID: "t"}, events.TurnStarted{Text: "x"})
	if err := s.Check(s.In(e.Type, "", e.ProjectID, e.SessionID), e); err != nil {
		t.Fatalf("own subject: %v", err)
	}
	// The form before tenants vouches for the default tenant.
	if err := s.Check("engram.in.turn_started.acme%2Fweb.chat%201", e); err != nil {
		t.Fatalf("own subject of the older form: %v", err)
	}
	mc := events.New(events.Ref{ProjectID: "p"}, events.MemoryChanged{Changes: []events.Change{{ID: "n", Kind: events.ChangeCreated}}})
	if err := s.Check(s.Out(mc.Type, "", "p", ""), mc); err != nil {
		t.Fatalf("output subject without session: %v", err)
	}
	for _, subj := range []string{
		"engram.in.turn_started.%.victim.chat%201",
		"engram.in.turn_started.%.acme%2Fweb.other",
		"engram.in.turn_ended.%.acme%2Fweb.chat%201",
		"engram.out.injection_ready.%.acme%2Fweb.chat%201",
		"engram.in.turn_started.%.acme%2fweb.chat%201",
		"acme.in.turn_started.%.acme%2Fweb.chat%201",
		"engram.in.turn_started.other.acme%2Fweb.chat%201", // another tenant
	} {
		err := s.Check(subj, e)
		var fe *events.FieldError
		if !errors.As(err, &fe) || fe.Field != "subject" || !errors.Is(err, events.ErrInvalidEvent) {
			t.Errorf("Check(%q) = %v, want a subject field error", subj, err)
		}
	}
}

// TestSubjectsCheckBindsTheTenant: a body that names another tenant than
// its subject is refused, in both directions, and an event of the form
// before tenants is taken only for the default tenant.
func TestSubjectsCheckBindsTheTenant(t *testing.T) {
	s := events.Subjects{}
	acme := events.NewTurnEnded(events.Ref{TenantID: "acme", ProjectID: "p", SessionID: "s", TurnID: "t"},
		events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: "hi"}}})
	if err := s.Check(s.In(acme.Type, "acme", "p", "s"), acme); err != nil {
		t.Fatalf("own subject: %v", err)
	}
	for _, subj := range []string{
		s.In(acme.Type, "", "p", "s"),       // the default tenant's subject, acme's body
		s.In(acme.Type, "victim", "p", "s"), // another tenant's subject
		"engram.in.turn_ended.p.s",          // the older form vouches for the default tenant only
	} {
		if err := s.Check(subj, acme); err == nil || !strings.Contains(err.Error(), "tenant") {
			t.Errorf("Check(%q) of tenant acme's body = %v, want a tenant mismatch", subj, err)
		}
	}
	def := acme
	def.TenantID = ""
	if err := s.Check(s.In(def.Type, "acme", "p", "s"), def); err == nil {
		t.Error("acme's subject carried a default tenant's body")
	}
}
