package consolidate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// Handler is the session_idle handler for the runner.
type Handler struct {
	c   *Consolidator
	log *zap.Logger
}

// NewHandler returns the session_idle handler. log may be nil.
func NewHandler(c *Consolidator, log *zap.Logger) *Handler {
	if log == nil {
		log = zap.NewNop()
	}
	return &Handler{c: c, log: log}
}

// RequestFromEvent converts a session_idle event. An event of another type
// is an error wrapping events.ErrInvalidEvent.
func RequestFromEvent(ev events.Envelope) (Request, error) {
	idle, err := events.PayloadAs[events.SessionIdle](ev)
	if err != nil {
		return Request{}, fmt.Errorf("consolidate: %w", err)
	}
	return Request{Tenant: ev.TenantID, Project: ev.ProjectID, Session: ev.SessionID, Cause: ev.ID, IdleSince: idle.LastActivity}, nil
}

// Handle consolidates the session of one session_idle event (every pass
// its backlog takes, see Consolidator.Run) and tells the runner what to
// do:
//
//   - another pass holds the session: ErrBusy, transient (the runner's
//     backoff, 1 s doubling): the event is acknowledged only once a pass
//     of its own ran (or found nothing to do), see ErrBusy;
//   - the model unavailable or missing, the store or the stream
//     unavailable: Unavailable (the runner pauses pulling; the pass resumes
//     from its journal on redelivery, nothing is lost);
//   - the project's token budget spent: RetryAfter until it resets;
//   - a turn_ended of the session not yet stored by the extractor
//     (ErrTranscriptBehind): transient, retried with the runner's backoff;
//   - an event that is not a valid session_idle: Permanent.
func (h *Handler) Handle(ctx context.Context, ev events.Envelope) error {
	req, err := RequestFromEvent(ev)
	if err != nil {
		return err
	}
	res, err := h.c.Run(ctx, req)
	if err != nil {
		return Classify(err)
	}
	if res.Busy {
		return runner.Wait(ErrBusy) // handled again shortly, no delivery spent
	}
	if !res.Empty {
		h.log.Debug("session consolidated", zap.String("event_id", ev.ID), zap.String("project", ev.ProjectID),
			zap.String("session", ev.SessionID), zap.String("verdict", string(res.Verdict)),
			zap.String("pass", res.Pass.ID), zap.Int("steps", res.Pass.Steps), zap.Int("passes", len(res.Passes)),
			zap.Int64("up_to", res.Pass.UpTo))
	}
	return nil
}

// Classify maps a pass's error onto the runner's decisions (see Handle).
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var budget *llm.BudgetError
	switch {
	case errors.Is(err, memory.ErrFailedOver), errors.Is(err, memory.ErrNotReplicated):
		// A call's writes not confirmed on a replica: the pass resumes
		// from its journal as the same delivery.
		return runner.Wait(err)
	case errors.Is(err, ErrTranscriptBehind):
		return runner.Wait(err) // not a failure: handled again shortly, no delivery spent
	case errors.As(err, &budget):
		return runner.RetryAfter(err, max(time.Until(budget.Until), time.Second))
	case errors.Is(err, llm.ErrUnavailable), errors.Is(err, llm.ErrModelMissing), errors.Is(err, memory.ErrUnavailable):
		return runner.Unavailable(err)
	case errors.Is(err, llm.ErrInvalidRequest), errors.Is(err, memory.ErrInvalid):
		return runner.Permanent(err)
	}
	return err
}
