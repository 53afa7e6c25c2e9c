package inject_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// sink is a Publisher that keeps what the handler sent.
type sink struct {
	mu        sync.Mutex
	published []events.Envelope
	replies   []string
}

func (s *sink) Publish(_ context.Context, e events.Envelope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.published = append(s.published, e)
	return nil
}

func (s *sink) Respond(replyTo string, _ events.Envelope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, replyTo)
	return nil
}

// A block composed after the turn's reply deadline (the store slowed down
// by a failover while the injector composed it) is neither sent nor
// recorded: the platform went on without memory, and a record would have
// the extractor judge memories the turn never carried.
func TestBlockComposedPastTheDeadlineIsNotRecorded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b, nil)
		f.add(memory.Node{Subkind: memory.Decision, Label: "Deploys to production run through make release"})
		start := time.Now()
		for _, tc := range []struct {
			turn string
			took time.Duration // what composing took, by the handler's clock
			sent bool
		}{{"in-time", 0, true}, {"composed-late", 2 * time.Minute, false}} {
			var mu sync.Mutex
			calls := 0
			clock := func() time.Time { // the first reading before Compose, the next after it
				mu.Lock()
				defer mu.Unlock()
				calls++
				if calls == 1 {
					return start
				}
				return start.Add(tc.took)
			}
			out := &sink{}
			h := inject.NewHandler(f.inj, out, nil, inject.WithWallClock(clock))
			ev := events.NewTurnStarted(events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: tc.turn},
				events.TurnStarted{Text: "how do we deploy to production?", ReplyTo: "_INBOX.late." + tc.turn, ReplyBy: start.Add(time.Minute).UTC()})
			if err := h.Handle(f.ctx, ev); err != nil {
				t.Fatalf("%s: %v", tc.turn, err)
			}
			_, recorded, err := f.inj.Recorded(f.ctx, inject.Request{Project: "p1", Session: "s1", Turn: tc.turn})
			if err != nil {
				t.Fatal(err)
			}
			if sent := len(out.replies) == 1 && len(out.published) == 1; sent != tc.sent || recorded != tc.sent {
				t.Errorf("%s: %d replies, %d injection_ready, recorded %v; want all or nothing: %v", tc.turn, len(out.replies), len(out.published), recorded, tc.sent)
			}
		}
	})
}
