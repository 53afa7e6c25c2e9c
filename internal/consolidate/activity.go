package consolidate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
)

// StreamActivity reads a session's latest turn_started from the input
// stream (every replica reads the same stream), so a pass on any replica
// sees a turn that started on any other: one direct get of the last message
// on the session's turn_started subject per step. It also tells whether the
// session's latest turn_ended is still unacknowledged by the extractor's
// consumer (its stream sequence above the consumer's ack floor), which
// holds under interest retention (the message is then still there) and
// limits retention alike; a message acknowledged out of order above the
// floor reads as pending until the floor passes it (a short wait).
type StreamActivity struct {
	js       jetstream.JetStream
	name     string
	subjects events.Subjects

	mu     sync.Mutex
	stream jetstream.Stream
}

var _ Activity = (*StreamActivity)(nil)

// NewStreamActivity reads turn_started from the stream named name.
func NewStreamActivity(js jetstream.JetStream, name string, subjects events.Subjects) *StreamActivity {
	return &StreamActivity{js: js, name: name, subjects: subjects}
}

func (a *StreamActivity) handle(ctx context.Context) (jetstream.Stream, error) {
	a.mu.Lock()
	st := a.stream
	a.mu.Unlock()
	if st == nil {
		s, err := a.js.Stream(ctx, a.name)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", a.name, err)
		}
		a.mu.Lock()
		a.stream, st = s, s
		a.mu.Unlock()
	}
	return st, nil
}

// TurnEndedPending implements Activity.
func (a *StreamActivity) TurnEndedPending(ctx context.Context, project, session string) (bool, error) {
	st, err := a.handle(ctx)
	if err != nil {
		return false, err
	}
	m, err := st.GetLastMsgForSubject(ctx, a.subjects.In(events.TypeTurnEnded, project, session))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil // none, or every consumer has acknowledged it (interest retention)
	}
	if err != nil {
		return false, fmt.Errorf("last turn_ended: %w", err)
	}
	cons, err := st.Consumer(ctx, events.ConsumerExtractor)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, nil // no extractor in this topology: nothing to wait for
	}
	if err != nil {
		return false, fmt.Errorf("extractor consumer: %w", err)
	}
	info := cons.CachedInfo()
	if info == nil || info.AckFloor.Stream < m.Sequence {
		if info, err = cons.Info(ctx); err != nil {
			return false, fmt.Errorf("extractor consumer: %w", err)
		}
	}
	return info.AckFloor.Stream < m.Sequence, nil
}

// LastTurnStarted implements Activity.
func (a *StreamActivity) LastTurnStarted(ctx context.Context, project, session string) (time.Time, error) {
	st, err := a.handle(ctx)
	if err != nil {
		return time.Time{}, err
	}
	m, err := st.GetLastMsgForSubject(ctx, a.subjects.In(events.TypeTurnStarted, project, session))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("last turn_started: %w", err)
	}
	return m.Time, nil
}
