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
// stream (ENGRAM_IN keeps input events by age, and every replica reads the
// same stream), so a pass on any replica sees a turn that started on any
// other: one direct get of the last message on the session's turn_started
// subject per step.
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

// LastTurnStarted implements Activity. The subject names the project and
// session but not the tenant: when the last turn_started on it is another
// tenant's (the same ids in two tenants), it is not this session's and
// none is known (the pass goes on; one of this tenant's behind it is not
// seen, which at worst lets a pass finish while its user is back).
func (a *StreamActivity) LastTurnStarted(ctx context.Context, tenant, project, session string) (time.Time, error) {
	a.mu.Lock()
	st := a.stream
	a.mu.Unlock()
	if st == nil {
		s, err := a.js.Stream(ctx, a.name)
		if err != nil {
			return time.Time{}, fmt.Errorf("stream %s: %w", a.name, err)
		}
		a.mu.Lock()
		a.stream, st = s, s
		a.mu.Unlock()
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
