package inject

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"time"

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

// WithReplyPrefixes sets the subjects a turn_started's reply_to may name
// (ENGRAM_REPLY_PREFIXES; default events.DefaultReplyPrefix): a reply_to
// elsewhere is a permanent error, dead-lettered with its reason, and
// nothing is published for the event.
func WithReplyPrefixes(prefixes ...string) HandlerOption {
	return func(h *Handler) { h.replyPrefixes = append([]string(nil), prefixes...) }
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
		// inboxes would make it write for the event's sender.
		if err := events.CheckReplySubject(ts.ReplyTo, h.replyPrefixes); err != nil {
			return fmt.Errorf("inject: %w", err) // wraps events.ErrInvalidEvent: permanent
		}
	}
	if !ts.ReplyBy.IsZero() && h.now().After(ts.ReplyBy) {
		// The platform went on without memory: neither answer nor record
		// an injection that the turn never carried.
		h.log.Info("turn_started arrived after its reply deadline; skipped",
			zap.String("event_id", ev.ID), zap.String("project", ev.ProjectID), zap.String("session", ev.SessionID),
			zap.Time("reply_by", ts.ReplyBy))
		return nil
	}
	req := Request{
		Tenant: ev.TenantID, Project: ev.ProjectID, Session: ev.SessionID, Turn: ev.TurnID,
		Text: ts.Text, Paths: ts.Paths, ProjectNames: ts.ProjectNames,
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
	out := events.New(ev.Ref(), events.InjectionReady{InReplyTo: ev.ID, Block: block.Text, NodeIDs: block.IDs, Scores: block.Scores()})
	// One answer per turn_started: a redelivery after a publish that did
	// land is dropped by the stream's duplicate window.
	out.ID = readyID(ev.ID)
	if ts.ReplyTo != "" {
		if err := h.pub.Respond(ts.ReplyTo, out); err != nil {
			// The platform may have gone; injection_ready still records the answer.
			h.log.Warn("reply to platform failed", zap.String("event_id", ev.ID), zap.Error(err))
		}
		// The reply waits in the connection's buffer for its flusher
		// goroutine, which would otherwise wait for a free CPU while this
		// one writes the record below: let it go first.
		runtime.Gosched()
	}
	// The platform is answered before the record is written: the record
	// is for the extractor at turn end, and the event is acknowledged only
	// after it, so a failure here redoes the turn (the late second reply
	// finds nobody waiting). A redelivery that comes after the reply
	// deadline is skipped like any late event, and that turn's record is
	// lost: the extractor then judges no injection for it.
	if err := h.inj.Record(ctx, req, block); errors.Is(err, memory.ErrUnavailable) {
		return runner.Unavailable(err)
	} else if err != nil {
		return err
	}
	if err := h.pub.Publish(ctx, out); err != nil {
		return fmt.Errorf("inject: publish injection_ready: %w", err)
	}
	return nil
}

// readyID is the id of the injection_ready answering the event id.
func readyID(eventID string) string {
	sum := sha256.Sum256([]byte("injection_ready\x00" + eventID))
	return "i" + hex.EncodeToString(sum[:])[:25]
}
