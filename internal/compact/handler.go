package compact

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

// Handler is the tokens_reported handler for the runner.
type Handler struct {
	c   *Compactor
	log *zap.Logger
}

// NewHandler returns the tokens_reported handler. log may be nil.
func NewHandler(c *Compactor, log *zap.Logger) *Handler {
	if log == nil {
		log = zap.NewNop()
	}
	return &Handler{c: c, log: log}
}

// ReportFromEvent converts a tokens_reported event. An event of another
// type is an error wrapping events.ErrInvalidEvent.
func ReportFromEvent(ev events.Envelope) (Report, error) {
	tr, err := events.PayloadAs[events.TokensReported](ev)
	if err != nil {
		return Report{}, fmt.Errorf("compact: %w", err)
	}
	return Report{EventID: ev.ID, Tenant: ev.TenantID, Project: ev.ProjectID, Session: ev.SessionID, StackID: tr.StackID,
		InputTokens: tr.InputTokens, ContextWindow: tr.ContextWindow, Ephemeral: tr.Ephemeral, Force: tr.Force,
		At: ev.OccurredAt}, nil
}

// Handle handles one tokens_reported event and tells the runner what to do:
//
//   - the model unavailable or missing, the store unavailable: Unavailable
//     (the runner waits and pauses pulling; nothing is dead-lettered);
//   - the project's token budget spent: RetryAfter until it resets;
//   - a failed attempt (a refused summary, a model error that is not an
//     outage, a summary call timed out or answered 5xx while Ollama is
//     reachable): RetryAfter with Config.Backoff (1, 5, 15 minutes), and
//     Permanent after Config.MaxFailures (dead-lettered with the reason; a
//     refusal is logged with its reason at every attempt);
//   - another run holds the session: ErrBusy, transient (the runner's
//     backoff), see ErrBusy;
//   - an invalid request, a forced compaction of an ephemeral session, a
//     window too small for a summary call: Permanent (dead-lettered with
//     the reason).
func (h *Handler) Handle(ctx context.Context, ev events.Envelope) error {
	r, err := ReportFromEvent(ev)
	if err != nil {
		return err
	}
	res, err := h.c.Compact(ctx, r)
	if err != nil {
		var failed *FailedError
		var refused *RefusedError
		if errors.As(err, &failed) && errors.As(err, &refused) {
			h.log.Warn("summary refused", zap.String("event_id", ev.ID), zap.String("tenant", ev.TenantID),
				zap.String("project", ev.ProjectID), zap.String("session", ev.SessionID), zap.String("reason", string(refused.Reason)),
				zap.String("detail", refused.Detail), zap.Int("failures", failed.Failures), zap.Bool("final", failed.Final),
				zap.Duration("retry_in", failed.Delay))
		}
		return Classify(err)
	}
	if res.Outcome == Busy {
		return runner.Wait(ErrBusy) // handled again shortly, no delivery spent
	}
	if res.Outcome == Compacted {
		h.log.Info("conversation compacted", zap.String("event_id", ev.ID), zap.String("tenant", ev.TenantID), zap.String("project", ev.ProjectID),
			zap.String("session", ev.SessionID), zap.Int64("up_to", res.UpTo), zap.Int("covered", res.Covered),
			zap.Int("kept", res.Kept), zap.Int64("tokens_before", res.TokensBefore), zap.Int64("tokens_after", res.TokensAfter),
			zap.Int("steps", res.Steps), zap.Int("window", res.Window))
	} else {
		h.log.Debug("report handled", zap.String("event_id", ev.ID), zap.String("outcome", string(res.Outcome)),
			zap.Int64("effective", res.Effective), zap.Int64("threshold", res.Threshold))
	}
	return nil
}

// Classify maps a compaction error onto the runner's decisions (see
// Handler.Handle).
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var failed *FailedError
	var budget *llm.BudgetError
	switch {
	case errors.Is(err, ErrTranscriptBehind):
		return runner.Wait(err) // not a failure: handled again shortly, no delivery spent
	case errors.As(err, &failed):
		if failed.Final {
			return runner.Permanent(err)
		}
		return runner.RetryAfter(err, failed.Delay)
	case errors.As(err, &budget):
		return runner.RetryAfter(err, max(time.Until(budget.Until), time.Second))
	case errors.Is(err, llm.ErrUnavailable), errors.Is(err, llm.ErrModelMissing), errors.Is(err, memory.ErrUnavailable):
		return runner.Unavailable(err)
	case errors.Is(err, llm.ErrInvalidRequest), errors.Is(err, memory.ErrInvalid), errors.Is(err, ErrEphemeral), errors.Is(err, ErrWindowTooSmall):
		return runner.Permanent(err)
	}
	return err
}

// ModelGate returns a readiness check for the runner: it fails while Ollama
// cannot be reached or the summarize model is not installed (llm.RoleGate),
// so that tokens_reported events wait in the stream instead of spending
// deliveries.
func ModelGate(c llm.Checker) func(ctx context.Context) error {
	return llm.RoleGate(c, llm.RoleSummarize)
}
