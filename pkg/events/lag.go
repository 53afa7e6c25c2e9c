package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// apiAttempt bounds one JetStream API request of the lag reads (LastInput,
// ExtractorLag). A request or its reply can be lost for good when the
// server it went through is killed or the stream's leader changes under
// it; jetstream's own default timeout applies only to a context without a
// deadline, and a worker's handler context has one 15 minutes away, so an
// unanswered read held the compactor's event, its lane and its session's
// lease for that long (the chaos suite's clustered run, after a NATS node
// was killed). An unanswered attempt is sent again while ctx lasts, as
// Client.Publish does.
var apiAttempt = 5 * time.Second

// Retried runs call with each attempt bounded by apiAttempt, again while an
// attempt goes unanswered and ctx has not ended. The reads it wraps have no
// effects, so repeating one is safe.
func Retried[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	return RetriedWithin(ctx, apiAttempt, call)
}

// RetriedWithin is Retried with each attempt bounded by attempt.
func RetriedWithin[T any](ctx context.Context, attempt time.Duration, call func(context.Context) (T, error)) (T, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		v, err := call(actx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			continue
		}
		return v, err
	}
}

// ExtractorLag tells whether a session's latest turn_ended still waits for
// a consumer of turn_ended: the extractor (NewExtractorLag: the turn is not
// extracted yet) or the transcript consumer (NewTranscriptLag: its messages
// are missing from the stored transcript). Workers that read what another
// worker writes ask it before they judge a session: the compactor waits for
// the transcript only (a summary needs the messages, not their
// extraction), the consolidator for the extraction (its pass reviews the
// memories extraction wrote from those turns, and has the last word over
// them, as when the model is up; see internal/extract's doc). A session
// that is behind is retried, not consolidated or compacted short (its later
// events may never come).
//
// Under interest retention (ENGRAM_IN's default) a turn_ended is pending
// while it is still in the stream and above the extractor consumer's ack
// floor: the stream drops a message once every consumer that should see it
// (the extractor and the idle detector) has acknowledged it, each message on
// its own, and a message at or under the floor the extractor has
// acknowledged (only the idle detector is behind). Under limits retention
// the message stays, and the floor alone decides: one acknowledged out of
// order above the floor reads as pending until the floor passes it.
type ExtractorLag struct {
	js       jetstream.JetStream
	stream   string
	consumer string
	subjects Subjects

	mu sync.Mutex
	st jetstream.Stream
}

// NewExtractorLag reads t's input stream and extractor consumer: a turn is
// pending until it is extracted.
func NewExtractorLag(js jetstream.JetStream, t Topology) *ExtractorLag {
	return &ExtractorLag{js: js, stream: t.In.Name, consumer: ConsumerExtractor, subjects: t.Subjects()}
}

// NewTranscriptLag reads t's input stream and transcript consumer
// (ConsumerTranscript): a turn is pending until its transcript is stored,
// which needs no model.
func NewTranscriptLag(js jetstream.JetStream, t Topology) *ExtractorLag {
	return &ExtractorLag{js: js, stream: t.In.Name, consumer: ConsumerTranscript, subjects: t.Subjects()}
}

// TurnEndedPending reports whether the session's latest turn_ended has not
// been acknowledged by the lag's consumer yet. No turn_ended, or no such
// consumer on the stream: false. For the default tenant the subject of the
// form before tenants is read too (an event an older version stored).
func (l *ExtractorLag) TurnEndedPending(ctx context.Context, tenant, project, session string) (bool, error) {
	l.mu.Lock()
	st := l.st
	l.mu.Unlock()
	if st == nil {
		s, err := Retried(ctx, func(ctx context.Context) (jetstream.Stream, error) { return l.js.Stream(ctx, l.stream) })
		if err != nil {
			return false, fmt.Errorf("events: stream %s: %w", l.stream, err)
		}
		l.mu.Lock()
		l.st, st = s, s
		l.mu.Unlock()
	}
	m, err := LastInput(ctx, st, l.subjects, TypeTurnEnded, tenant, project, session)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil // none, or every consumer has acknowledged it (interest retention)
	}
	if err != nil {
		return false, fmt.Errorf("events: last turn_ended of %s/%s: %w", project, session, err)
	}
	cons, err := Retried(ctx, func(ctx context.Context) (jetstream.Consumer, error) { return st.Consumer(ctx, l.consumer) })
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("events: consumer %s: %w", l.consumer, err)
	}
	if info := cons.CachedInfo(); info.AckFloor.Stream >= m.Sequence {
		return false, nil
	}
	if st.CachedInfo().Config.Retention == jetstream.InterestPolicy {
		return true, nil // still in the stream: someone has not acknowledged it
	}
	// Limits retention: the floor read when the consumer was looked up may
	// be a little old; read it again.
	info, err := Retried(ctx, cons.Info)
	if err != nil {
		return false, fmt.Errorf("events: consumer %s: %w", l.consumer, err)
	}
	return info.AckFloor.Stream < m.Sequence, nil
}

// LastInput is the last input event of type t of a session in the input
// stream st (a direct get by subject: worker roles may not read ENGRAM_IN
// by sequence). For the default tenant the subject of the form before
// tenants (Address.Legacy) is read too, and the later of the two returned.
// None is jetstream.ErrMsgNotFound. An unanswered read is sent again
// (see Retried).
func LastInput(ctx context.Context, st jetstream.Stream, s Subjects, t Type, tenant, project, session string) (*jetstream.RawStreamMsg, error) {
	last := func(subject string) (*jetstream.RawStreamMsg, error) {
		return Retried(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
			return st.GetLastMsgForSubject(ctx, subject)
		})
	}
	m, err := last(s.In(t, tenant, project, session))
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, err
	}
	if tenant != "" {
		return m, err
	}
	legacy := s.prefix() + ".in." + string(t) + "." + EncodeToken(project) + "." + EncodeToken(session)
	lm, lerr := last(legacy)
	switch {
	case lerr != nil && !errors.Is(lerr, jetstream.ErrMsgNotFound):
		return nil, lerr
	case lerr != nil:
		return m, err
	case err != nil || lm.Sequence > m.Sequence:
		return lm, nil
	}
	return m, nil
}
