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

// TurnEndedPending implements Activity (events.ExtractorLag). It reads the
// subject, which does not name the tenant: another tenant's pending turn of
// the same project and session ids makes this one wait too (a delay, never
// a pass on a short transcript).
func (a *StreamActivity) TurnEndedPending(ctx context.Context, project, session string) (bool, error) {
	return a.lag.TurnEndedPending(ctx, project, session)
}

// LastTurnStarted implements Activity. The subject names the project and
// session but not the tenant: when the last turn_started on it is another
// tenant's (the same ids in two tenants), it is not this session's and
// none is known (the pass goes on; one of this tenant's behind it is not
// seen, which at worst lets a pass finish while its user is back).
func (a *StreamActivity) LastTurnStarted(ctx context.Context, tenant, project, session string) (time.Time, error) {
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
	var body struct {
		TenantID string `json:"tenant_id"`
	}
	if json.Unmarshal(m.Data, &body) != nil || body.TenantID != tenant {
		return time.Time{}, nil
	}
	return m.Time, nil
}
