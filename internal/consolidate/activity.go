package consolidate

import (
	"context"
	"encoding/json"
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
// session's latest turn_ended is still unacknowledged by the extractor
// (events.ExtractorLag).
type StreamActivity struct {
	js       jetstream.JetStream
	name     string
	subjects events.Subjects

	lag *events.ExtractorLag

	mu     sync.Mutex
	stream jetstream.Stream
}

var _ Activity = (*StreamActivity)(nil)

// NewStreamActivity reads turn_started from the stream named name.
func NewStreamActivity(js jetstream.JetStream, name string, subjects events.Subjects) *StreamActivity {
	t := events.DefaultTopology()
	t.In.Name, t.Prefix = name, subjects.Prefix
	return &StreamActivity{js: js, name: name, subjects: subjects, lag: events.NewExtractorLag(js, t)}
}

func (a *StreamActivity) handle(ctx context.Context) (jetstream.Stream, error) {
	a.mu.Lock()
	st := a.stream
	a.mu.Unlock()
	if st == nil {
		s, err := events.Retried(ctx, func(ctx context.Context) (jetstream.Stream, error) { return a.js.Stream(ctx, a.name) })
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", a.name, err)
		}
		a.mu.Lock()
		a.stream, st = s, s
		a.mu.Unlock()
	}
	return st, nil
}

// TurnEndedPending implements Activity (events.ExtractorLag): the subject
// names the tenant.
func (a *StreamActivity) TurnEndedPending(ctx context.Context, tenant, project, session string) (bool, error) {
	return a.lag.TurnEndedPending(ctx, tenant, project, session)
}

// LastTurnStarted implements Activity: the last turn_started on the
// session's subject, which names the tenant (events.LastInput; the default
// tenant's of the form before tenants too). A body that names another
// tenant than its subject is none (the runner dead-letters such events).
func (a *StreamActivity) LastTurnStarted(ctx context.Context, tenant, project, session string) (time.Time, error) {
	st, err := a.handle(ctx)
	if err != nil {
		return time.Time{}, err
	}
	m, err := events.LastInput(ctx, st, a.subjects, events.TypeTurnStarted, tenant, project, session)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("last turn_started: %w", err)
	}
	var body struct {
		TenantID string `json:"tenant_id"`
	}
	if json.Unmarshal(m.Data, &body) != nil || body.TenantID != tenant {
		return time.Time{}, nil
	}
	return m.Time, nil
}
