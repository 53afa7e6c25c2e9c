package runner_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
)

// Issue 23: an event is handled only when its subject (what the bus's
// permissions vouch for) names the body's type, project and session, and
// only when its raw bytes are valid UTF-8 (the JSON decoder would make
// tenant-\xff and tenant-\xfe one id). Anything else is dead-lettered with
// the reason, and the handler never sees it.
func TestSubjectMustMatchBodyAndBytesBeUTF8(t *testing.T) {
	h := newHarness(t, nil)
	var mu sync.Mutex
	var handled []events.Envelope
	h.start(h.config(), func(_ context.Context, e events.Envelope) error {
		mu.Lock()
		handled = append(handled, e)
		mu.Unlock()
		return nil
	})
	body := func(project, session string) []byte {
		e := events.NewTurnEnded(events.Ref{ProjectID: project, SessionID: session, TurnID: "t1"},
			events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: "hello"}}})
		b, err := events.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	s := h.topo.Subjects()
	cases := []struct {
		name, subject string
		data          []byte
		reason        string
	}{
		{"project", "engram.in.turn_ended.%.victim.s1", body("other", "s1"), `project "victim", body "other"`},
		{"session", "engram.in.turn_ended.%.p.s1", body("p", "s2"), `session "s1", body "s2"`},
		{"both", "engram.in.turn_ended.%.victim.s9", body("other", "s1"), `session "s9", body "s1"`},
		{"escaped differently", "engram.in.turn_ended.%.acme%2fweb.s1", body("acme/web", "s1"), "bad escape"},
		// The tenant is bound by the subject (issue 31): a default
		// tenant's body on another tenant's subject, and the reverse.
		{"tenant", "engram.in.turn_ended.victim.p.s1", body("p", "s1"), `tenant "victim", body ""`},
		{"tenant in the body", "engram.in.turn_ended.%.p.s1",
			[]byte(strings.Replace(string(body("p", "s1")), `"project_id"`, `"tenant_id":"victim","project_id"`, 1)), `tenant "", body "victim"`},
		{"unescaped token", s.In(events.TypeTurnEnded, "", "acme", "s1"), body("acme/web", "s1"), `project "acme", body "acme/web"`},
		{"invalid UTF-8", s.In(events.TypeTurnEnded, "", "tenant-\xff", "s1"),
			[]byte(strings.Replace(string(body("tenant-x", "s1")), "tenant-x", "tenant-\xff", 1)), "not valid UTF-8"},
		{"invalid UTF-8 in the payload", s.In(events.TypeTurnEnded, "", "p", "s1"),
			[]byte(strings.Replace(string(body("p", "s1")), "hello", "hel\xfelo", 1)), "not valid UTF-8"},
		{"lone surrogate", s.In(events.TypeTurnEnded, "", "p", "s1"),
			[]byte(strings.Replace(string(body("p", "s1")), "hello", `hel\udcffo`, 1)), "surrogate"},
	}
	for _, c := range cases {
		if _, err := h.js.Publish(context.Background(), c.subject, c.data); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	// A matching event with an escaped id is handled, with the body's ids.
	good := body("acme/web", "chat 1")
	if _, err := h.js.Publish(context.Background(), s.In(events.TypeTurnEnded, "", "acme/web", "chat 1"), good); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every bad event dead-lettered", func() bool { return len(h.letters()) == len(cases) })
	eventually(t, "the good event handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == 1
	})
	for i, l := range h.letters() {
		c := cases[i]
		if l.Subject != c.subject || !strings.Contains(l.Reason, c.reason) || !strings.HasPrefix(l.Reason, "invalid event") {
			t.Errorf("%s: letter on %q with reason %q, want %q", c.name, l.Subject, l.Reason, c.reason)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if e := handled[0]; e.ProjectID != "acme/web" || e.SessionID != "chat 1" {
		t.Errorf("handled %q/%q", e.ProjectID, e.SessionID)
	}
}

// A handler's permanent error that repeats a URL with its password is
// dead-lettered with the password masked.
func TestDeadLetterReasonMasksURLPasswords(t *testing.T) {
	h := newHarness(t, nil)
	h.start(h.config(), func(context.Context, events.Envelope) error {
		return runner.Permanent(errors.New(`store: parse "redis://engram:Pw-1234567@cache:x": invalid port`))
	})
	h.publish(1)
	eventually(t, "dead-lettered", func() bool { return len(h.letters()) == 1 })
	if r := h.letters()[0].Reason; strings.Contains(r, "Pw-1234567") || !strings.Contains(r, "redis://engram:xxxxx@cache") {
		t.Errorf("reason %q", r)
	}
}
