package events_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

func TestCheckReplySubject(t *testing.T) {
	for _, c := range []struct {
		subj     string
		prefixes []string
		ok       bool
	}{
		{"_INBOX.abc", nil, true},
		{"_INBOX.abc.7", nil, true},
		{"_INBOX", nil, false},
		{"_INBOXx.abc", nil, false},
		{"$KV.ENGRAM_ACTIVITY.x", nil, false},
		{"$JS.API.STREAM.DELETE.ENGRAM_DLQ", nil, false},
		{"engram.in.turn_ended.other.s1", nil, false},
		{"engram.out.memory_changed.other", nil, false},
		{"_INBOX.*", nil, false},
		{"_INBOX.>", nil, false},
		{"_INBOX. x", nil, false},
		{"_INBOX_acme.x", []string{"_INBOX.", "_INBOX_acme"}, true},
		{"_INBOX.x", []string{"_INBOX_acme."}, false},
	} {
		err := events.CheckReplySubject(c.subj, c.prefixes)
		if (err == nil) != c.ok {
			t.Errorf("CheckReplySubject(%q, %q) = %v, want ok=%v", c.subj, c.prefixes, err, c.ok)
		}
		var fe *events.FieldError
		if err != nil && (!errors.Is(err, events.ErrInvalidEvent) || !errors.As(err, &fe) || fe.Field != "payload.reply_to") {
			t.Errorf("%q: error %v is not a payload.reply_to field error", c.subj, err)
		}
	}
	for _, p := range []string{"$KV.X", "$JS.API.", "engram", "engram.out", "_INBOX.*", "", ". x"} {
		if err := events.ValidateReplyPrefix(p, ""); err == nil {
			t.Errorf("ValidateReplyPrefix(%q) accepted", p)
		}
	}
	if err := events.ValidateReplyPrefix("engram", "acme.engram"); err != nil {
		t.Errorf("a prefix beside a custom subject prefix: %v", err)
	}
	if err := events.ValidateReplyPrefix("acme", "acme.engram"); err == nil {
		t.Error("a reply prefix above the subject prefix was accepted")
	}
}

// The context service does not answer a request whose reply subject is
// outside the inboxes (a stream's subject, a KV key); a real request is
// still answered.
func TestContextServiceAnswersOnlyInboxes(t *testing.T) {
	srv, nc := eventstest.RunServer(t)
	eventstest.Setup(t, nc, eventstest.Topology())
	c, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := c.ServeContext(func(context.Context, events.Ref, events.ContextRequest) (events.ContextReply, error) {
		return events.ContextReply{Summary: "s"}, nil
	}, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	attacker := eventstest.Connect(t, srv)
	spy, err := attacker.SubscribeSync("engram.out.>")
	if err != nil {
		t.Fatal(err)
	}
	subj := c.Subjects().ContextAPI("", "p", "s")
	if err := attacker.PublishRequest(subj, "engram.out.memory_changed.victim", nil); err != nil {
		t.Fatal(err)
	}
	if m, err := attacker.Request(subj, nil, 5*time.Second); err != nil || len(m.Data) == 0 {
		t.Fatalf("a real request: %v", err)
	}
	if m, err := spy.NextMsg(300 * time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("the context service answered on %s (%v)", m.Subject, err)
	}
}
