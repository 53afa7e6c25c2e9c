package events_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

func TestContextSubjects(t *testing.T) {
	s := events.Subjects{}
	subj := s.ContextAPI("", "acme/web", "chat 42")
	if subj != "engram.api.context.%.acme%2Fweb.chat%2042" {
		t.Fatalf("subject %q", subj)
	}
	got, err := s.ParseContextAPI(subj)
	if err != nil || got.TenantID != "" || got.ProjectID != "acme/web" || got.SessionID != "chat 42" {
		t.Fatalf("parse: %+v %v", got, err)
	}
	if got, err := s.ParseContextAPI(s.ContextAPI("acme", "p", "s")); err != nil || got != (events.Ref{TenantID: "acme", ProjectID: "p", SessionID: "s"}) {
		t.Fatalf("parse with a tenant: %+v %v", got, err)
	}
	for _, bad := range []string{"engram.api.context.p", "engram.api.context.p.s", "engram.in.turn_ended.%.p.s", "engram.api.context.t.p.s.x", "engram.api.context.t.a%2.s"} {
		if _, err := s.ParseContextAPI(bad); !errors.Is(err, events.ErrInvalidSubject) {
			t.Errorf("ParseContextAPI(%q) = %v", bad, err)
		}
	}
	// Outside every stream.
	for _, sc := range events.DefaultTopology().StreamConfigs() {
		for _, f := range sc.Subjects {
			if strings.HasPrefix(subj, strings.TrimSuffix(f, ">")) {
				t.Errorf("stream %s (%s) would capture context requests", sc.Name, f)
			}
		}
	}
}

func TestContextNoService(t *testing.T) {
	_, c := setup(t, events.WithContextTimeout(time.Second))
	_, err := c.Context(context.Background(), ref)
	if !errors.Is(err, events.ErrContextUnavailable) || !strings.Contains(err.Error(), "no context service") {
		t.Fatalf("no service: %v", err)
	}
	if _, err := c.Context(context.Background(), events.Ref{ProjectID: "p"}); err == nil {
		t.Fatal("a request without a session")
	}
}

func TestContextServiceErrorAndTimeout(t *testing.T) {
	_, c := setup(t, events.WithContextTimeout(300*time.Millisecond))
	svc, err := c.ServeContext(func(ctx context.Context, r events.Ref, _ events.ContextRequest) (events.ContextReply, error) {
		if r.SessionID == "slow" {
			<-ctx.Done()
			return events.ContextReply{}, ctx.Err()
		}
		return events.ContextReply{}, fmt.Errorf("store down for %s", r.ProjectID)
	}, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := svc.Stop(); err != nil {
			t.Error(err)
		}
	}()
	_, err = c.Context(context.Background(), ref)
	if !errors.Is(err, events.ErrContextUnavailable) || !strings.Contains(err.Error(), "store down for acme/web") {
		t.Fatalf("failing service: %v", err)
	}
	start := time.Now()
	_, err = c.Context(context.Background(), events.Ref{ProjectID: "p", SessionID: "slow"})
	if !errors.Is(err, events.ErrContextUnavailable) || time.Since(start) > 900*time.Millisecond {
		t.Fatalf("slow service: %v after %v", err, time.Since(start))
	}
}

// TestContextPages: a context larger than the server's max payload comes
// back in pages, whole, in order; a message too large for a reply of its
// own keeps its head and tail.
func TestContextPages(t *testing.T) {
	srv, nc := eventstest.RunServer(t)
	_ = eventstest.Setup(t, nc, eventstest.Topology())
	c, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	limit := int(nc.MaxPayload())
	var all []events.ContextMessage
	for i := range 12 {
		size := limit / 5
		if i == 7 {
			size = 3 * limit // alone larger than a reply
		}
		all = append(all, events.ContextMessage{ID: int64(10 + i), TurnID: fmt.Sprintf("t%d", i),
			Message: events.Message{Role: events.RoleTool, ToolCallID: fmt.Sprintf("c%d", i), ToolStatus: events.ToolOK,
				Content: fmt.Sprintf("<%d>", i) + strings.Repeat("x\"", size/2) + "END"}})
	}
	var requests []int64
	svc, err := c.ServeContext(func(_ context.Context, r events.Ref, req events.ContextRequest) (events.ContextReply, error) {
		requests = append(requests, req.AfterID)
		var rep events.ContextReply
		if req.AfterID == 0 {
			rep = events.ContextReply{Block: "BLOCK", Summary: "S", UpTo: 9, Tokens: 123}
		}
		for _, m := range all {
			if m.ID > max(req.AfterID, 9) {
				rep.Messages = append(rep.Messages, m)
			}
		}
		return rep, nil
	}, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := svc.Stop(); err != nil {
			t.Error(err)
		}
	}()
	got, err := c.Context(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if got.Block != "BLOCK" || got.Summary != "S" || got.UpTo != 9 || got.Tokens != 123 || len(got.Messages) != len(all) {
		t.Fatalf("context: block %q, %d messages", got.Block, len(got.Messages))
	}
	if len(requests) < 4 {
		t.Fatalf("%d pages for %d bytes with a %d-byte limit", len(requests), 5*limit, limit)
	}
	for i, m := range got.Messages {
		w := all[i]
		if m.ID != w.ID || m.TurnID != w.TurnID || m.ToolCallID != w.ToolCallID {
			t.Fatalf("message %d: %+v", i, m.ID)
		}
		if i == 7 {
			if len(m.Content) >= len(w.Content) || !strings.HasPrefix(m.Content, "<7>") || !strings.HasSuffix(m.Content, "END") || !strings.Contains(m.Content, "bytes cut to fit") {
				t.Fatalf("the oversized message: %d bytes, head %.10q", len(m.Content), m.Content)
			}
			continue
		}
		if m.Content != w.Content {
			t.Fatalf("message %d changed", i)
		}
	}
	_ = srv
}
