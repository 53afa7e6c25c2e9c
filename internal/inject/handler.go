package inject

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// Publisher sends the injector's answers.
type Publisher interface {
	// Publish sends an output event to ENGRAM_OUT.
	Publish(ctx context.Context, e events.Envelope) error
	// Respond sends an event to a platform's reply subject (core NATS).
	Respond(replyTo string, e events.Envelope) error
}

// Handler is the turn_started handler: it builds the block, answers the
// waiting platform and publishes injection_ready.
type Handler struct {
	inj *Injector
	pub Publisher
	log *zap.Logger
	now func() time.Time
	// replyPrefixes are where reply_to may point (empty:
	// events.DefaultReplyPrefix).
	replyPrefixes []string
}

// HandlerOption configures a Handler.
type HandlerOption func(*Handler)

// WithReplyPrefixes sets the subjects a default tenant's turn_started's
// reply_to may name (ENGRAM_REPLY_PREFIXES; default
// events.DefaultReplyPrefix; another tenant's reply_to must be under its
// events.TenantInbox): a reply_to elsewhere is a permanent error,
// dead-lettered with its reason, and nothing is published for the event.
func WithReplyPrefixes(prefixes ...string) HandlerOption {
	return func(h *Handler) { h.replyPrefixes = append([]string(nil), prefixes...) }
}

// WithWallClock sets the clock the reply deadline is judged by (tests).
func WithWallClock(now func() time.Time) HandlerOption {
	return func(h *Handler) { h.now = now }
}

// NewHandler returns the turn_started handler.
func NewHandler(inj *Injector, pub Publisher, log *zap.Logger, opts ...HandlerOption) *Handler {
	if log == nil {
		log = zap.NewNop()
	}
	// The reply deadline is the platform's wall clock, not the ranking clock.
	h := &Handler{inj: inj, pub: pub, log: log, now: time.Now}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Handle answers one turn_started event. An event of another type or with an
// invalid payload is a permanent error (the runner dead-letters it).
func (h *Handler) Handle(ctx context.Context, ev events.Envelope) error {
	ts, err := events.PayloadAs[events.TurnStarted](ev)
	if err != nil {
		return fmt.Errorf("inject: %w", err) // wraps events.ErrInvalidEvent: permanent
	}
	if ts.ReplyTo != "" {
		// Before anything is read or written: the injector's connection
		// may publish where a platform may not, so a reply_to outside the
		// inboxes of the event's tenant (which its subject vouches for)
		// would make it write for the event's sender: into a stream, or
		// another tenant's inbox with this tenant's block.
		if err := events.CheckReplyFor(ev.TenantID, ts.ReplyTo, h.replyPrefixes); err != nil {
			return fmt.Errorf("inject: %w", err) // wraps events.ErrInvalidEvent: permanent
		}
	}
	late := h.late(ts)
	req := Request{
		Tenant: ev.TenantID, Project: ev.ProjectID, Session: ev.SessionID, Turn: ev.TurnID,
		Text: ts.Text, Paths: ts.Paths, ProjectNames: ts.ProjectNames,
		// The record keeps why each line is there, for the console's
		// turns page (ids and numbers: a few hundred bytes a line).
		Explain: true,
	}
	// One block per turn: a turn already recorded was composed and
	// answered by an earlier delivery of this event, which then failed
	// (publishing injection_ready in a NATS outage, a store error) or was
	// not acknowledged. It is answered again with the recorded block, never
	// composed anew (that could pick other memories, and the extractor
	// judges what the record holds), and injection_ready is published even
	// after the reply deadline: the record exists, so the answer is part of
	// the turn. One read, on every turn.
	prior, found, err := h.inj.Recorded(ctx, req)
	if errors.Is(err, memory.ErrUnavailable) {
		return runner.Unavailable(err)
	}
	if err != nil {
		return err
	}
	if found {
		h.log.Info("turn_started already answered; its recorded block sent again",
			zap.String("event_id", ev.ID), zap.String("project", ev.ProjectID), zap.String("session", ev.SessionID), zap.Bool("late", late))
		out := readyEvent(ev, prior)
		if ts.ReplyTo != "" && !late {
			h.respond(ts.ReplyTo, ev, out)
		}
		return h.publishReady(ctx, out)
	}
	if late {
		// The platform went on without memory: neither answer nor record
		// an injection that the turn never carried.
		h.skipped(ev, ts.ReplyBy)
		return nil
	}
	block, err := h.inj.Compose(ctx, req)
	if errors.Is(err, memory.ErrUnavailable) {
		// The store is down: pause pulling instead of spending deliveries.
		return runner.Unavailable(err)
	}
	if err != nil {
		return err
	}
	for _, p := range block.Problems {
		h.log.Warn("injection degraded", zap.String("event_id", ev.ID), zap.String("project", ev.ProjectID), zap.Error(p))
	}
	if h.late(ts) {
		// Composed past the deadline (the store slowed down: a failover):
		// the platform went on without memory, as above. A record now
		// would have the extractor judge memories the turn never carried.
		h.skipped(ev, ts.ReplyBy, zap.Bool("after_compose", true))
		return nil
	}
	out := readyEvent(ev, block.Injection())
	if ts.ReplyTo != "" {
		h.respond(ts.ReplyTo, ev, out)
		// The reply waits in the connection's buffer for its flusher
		// goroutine, which would otherwise wait for a free CPU while this
		// one writes the record below: let it go first.
		runtime.Gosched()
	}
	// The platform is answered before the record is written: the record
	// is for the extractor at turn end and for a redelivery (above), and
	// the event is acknowledged only after it and injection_ready, so a
	// failure here redoes the turn. A redelivery that finds no record
	// (the write failed) and comes after the reply deadline is skipped
	// like any late event: the turn then has no record, and the extractor
	// judges no injection for it.
	if err := h.inj.Record(ctx, req, block); err != nil {
		// What the platform got is not known to the store: a redelivery
		// composes anew, and the extractor judges that block, if any.
		h.log.Warn(notRecordedMessage, zap.String("event_id", ev.ID), zap.String("project", ev.ProjectID), zap.Error(err))
		if errors.Is(err, memory.ErrUnavailable) {
			return runner.Unavailable(err)
		}
		return err
	}
	return h.publishReady(ctx, out)
}

// publishReady publishes a recorded turn's injection_ready. The turn's
// work is done but for this announcement, so a failure waits for the bus
// (runner.Wait: handled again shortly, no delivery spent) instead of
// spending one of the injector's three deliveries: a stream leader's
// failover in a NATS cluster (5-9 s in the clustered chaos run) outlasted
// three deliveries' backoff and dead-lettered turns that were answered and
// recorded. The runner bounds the waiting (Config.MaxWait). An error no
// wait mends (the event too large, a bad subject) fails as before.
func (h *Handler) publishReady(ctx context.Context, out events.Envelope) error {
	err := h.pub.Publish(ctx, out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, events.ErrEventTooLarge), errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrBadSubject):
		// No wait mends these: the runner's retries, then the DLQ.
		return fmt.Errorf("inject: publish injection_ready: %w", err)
	}
	return runner.Wait(fmt.Errorf("inject: publish injection_ready: %w", err))
}

// ReplyBy is a turn_started's reply deadline (zero for other events or
// none): the runner's deadline for the injector (runner.WithDeadline).
func ReplyBy(ev events.Envelope) time.Time {
	if ts, ok := ev.Payload.(events.TurnStarted); ok {
		return ts.ReplyBy
	}
	return time.Time{}
}

// Expired logs a turn_started that the runner acknowledged without calling
// Handle because it was past its reply deadline on its first delivery
// (nothing can have been answered or recorded for it), like a late turn
// the handler skips.
func (h *Handler) Expired(ev events.Envelope) {
	h.skipped(ev, ReplyBy(ev), zap.Bool("before_handler", true))
}

// late reports whether the platform has stopped waiting for ts's answer.
func (h *Handler) late(ts events.TurnStarted) bool {
	return !ts.ReplyBy.IsZero() && h.now().After(ts.ReplyBy)
}

// skipped logs a turn_started left unanswered and unrecorded because the
// platform went on without memory (skipMessage: the chaos suite reads it).
func (h *Handler) skipped(ev events.Envelope, replyBy time.Time, more ...zap.Field) {
	h.log.Info(skipMessage, append([]zap.Field{zap.String("event_id", ev.ID), zap.String("project", ev.ProjectID),
		zap.String("session", ev.SessionID), zap.Time("reply_by", replyBy)}, more...)...)
}

// skipMessage is logged for a turn_started that arrived after its reply
// deadline with nothing recorded (the chaos suite reads it).
const skipMessage = "turn_started arrived after its reply deadline; skipped"

// notRecordedMessage is logged when the answered block could not be
// recorded (the chaos suite reads it).
const notRecordedMessage = "answered block not recorded"

// readyEvent is the injection_ready answering ev with in.
func readyEvent(ev events.Envelope, in memory.Injection) events.Envelope {
	if len(in.IDs) == 0 {
		in.IDs, in.Scores = nil, nil
	}
	out := events.New(ev.Ref(), events.InjectionReady{InReplyTo: ev.ID, Block: in.Text, NodeIDs: in.IDs, Scores: in.Scores})
	// One answer per turn_started: a redelivery after a publish that did
	// land is dropped by the stream's duplicate window.
	out.ID = readyID(ev.ID)
	return out
}

// respond replies to the waiting platform (core NATS).
func (h *Handler) respond(replyTo string, ev, out events.Envelope) {
	if err := h.pub.Respond(replyTo, out); err != nil {
		// The platform may have gone; injection_ready still records the answer.
		h.log.Warn("reply to platform failed", zap.String("event_id", ev.ID), zap.Error(err))
	}
}

// readyID is the id of the injection_ready answering the event id.
func readyID(eventID string) string {
	sum := sha256.Sum256([]byte("injection_ready\x00" + eventID))
	return "i" + hex.EncodeToString(sum[:])[:25]
}
