package extract

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

// Handler holds the turn_ended handlers for the runner: Store on the
// transcript consumer (no model), Handle on the extractor consumer (the
// model).
type Handler struct {
	x   *Extractor
	log *zap.Logger
}

// NewHandler returns the turn_ended handler. log may be nil.
func NewHandler(x *Extractor, log *zap.Logger) *Handler {
	if log == nil {
		log = zap.NewNop()
	}
	return &Handler{x: x, log: log}
}

// TurnFromEvent converts a turn_ended event. An event of another type is an
// error wrapping events.ErrInvalidEvent.
func TurnFromEvent(ev events.Envelope) (Turn, error) {
	te, err := events.PayloadAs[events.TurnEnded](ev)
	if err != nil {
		return Turn{}, fmt.Errorf("extract: %w", err)
	}
	t := Turn{EventID: ev.ID, Tenant: ev.TenantID, Project: ev.ProjectID, Session: ev.SessionID, Turn: ev.TurnID,
		ChangedPaths: te.ChangedPaths, InjectedNodeIDs: te.InjectedNodeIDs}
	t.Messages = make([]memory.Message, len(te.Messages))
	for i, m := range te.Messages {
		mm := memory.Message{
			TurnID: ev.TurnID, Role: memory.Role(m.Role), Content: m.Content,
			ToolName: m.ToolName, ToolCallID: m.ToolCallID, ToolStatus: memory.ToolStatus(m.ToolStatus),
			TokensIn: m.TokensIn, TokensOut: m.TokensOut, CreatedAt: ev.OccurredAt,
		}
		for _, c := range m.ToolCalls {
			mm.ToolCalls = append(mm.ToolCalls, memory.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		t.Messages[i] = mm
	}
	return t, nil
}

// Store handles one turn_ended event on the transcript consumer
// (events.ConsumerTranscript, gated on the store only): it stores the
// turn's transcript and marks memories on its changed paths stale
// (Extractor.StoreTurn), so that a model outage does not hold them back.
// The store unavailable: Unavailable; a turn that breaks the transcript
// rules: Permanent (the extractor consumer dead-letters it too, each
// consumer's letter on its own subject).
func (h *Handler) Store(ctx context.Context, ev events.Envelope) error {
	t, err := TurnFromEvent(ev)
	if err != nil {
		return err
	}
	res, err := h.x.StoreTurn(ctx, t)
	if err != nil {
		return Classify(err)
	}
	if res.Appended || len(res.Changes) > 0 {
		h.log.Debug("transcript stored", zap.String("event_id", ev.ID), zap.String("tenant", ev.TenantID), zap.String("project", ev.ProjectID),
			zap.String("session", ev.SessionID), zap.Bool("appended", res.Appended), zap.Int("stale", len(res.Changes)))
	}
	return nil
}

// Handle handles one turn_ended event on the extractor consumer (gated on
// the extraction model: Extractor.ExtractTurn) and tells the runner what to
// do:
//
//   - the model unavailable or missing, the store unavailable: Unavailable
//     (the runner waits and pauses pulling; nothing is dead-lettered);
//   - the project's token budget spent: RetryAfter until it resets;
//   - an invalid reply after the repair attempt: RetryAfter with the
//     span's backoff, and Permanent (dead-letter, with the model's last
//     reply in the reason) after Config.MaxInvalid failures; the transcript
//     is stored either way;
//   - a turn that breaks the transcript rules: Permanent;
//   - another replica holds the session and the turn is not extracted yet:
//     transient (ErrBusy), retried with the runner's backoff until it is;
//   - a turn of the span carried memories whose injection record is not
//     written yet (ErrInjectionPending): runner.Wait, InjectionWait at most.
func (h *Handler) Handle(ctx context.Context, ev events.Envelope) error {
	t, err := TurnFromEvent(ev)
	if err != nil {
		return err
	}
	res, err := h.x.ExtractTurn(ctx, t)
	if err != nil {
		return Classify(err)
	}
	if res.Spans > 0 || res.Busy {
		h.log.Debug("turn handled", zap.String("event_id", ev.ID), zap.String("tenant", ev.TenantID), zap.String("project", ev.ProjectID),
			zap.String("session", ev.SessionID), zap.Int("spans", res.Spans), zap.Bool("busy", res.Busy),
			zap.Int("changes", len(res.Changes)))
	}
	if res.Unjudged > 0 {
		h.log.Warn("turns that carried memories were extracted without their injection record (it never came): their memories are not judged",
			zap.String("event_id", ev.ID), zap.String("tenant", ev.TenantID), zap.String("project", ev.ProjectID),
			zap.String("session", ev.SessionID), zap.Int("turns", res.Unjudged))
	}
	if res.Busy {
		// Not acknowledged until the turn is extracted: see ErrBusy. A
		// wait, not a failure (runner.Wait: handled again after 1 s
		// doubling up to 15 s, for up to an hour, no delivery spent): it
		// finds the turn done soon after a live holder lets go, and
		// outlasts a dead holder's lease.
		return runner.Wait(ErrBusy)
	}
	return nil
}

// Classify maps an extraction error onto the runner's decisions (see
// Handler.Handle).
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var inv *InvalidReplyError
	var budget *llm.BudgetError
	switch {
	case errors.As(err, &inv):
		if inv.Final {
			return runner.Permanent(err)
		}
		return runner.RetryAfter(err, inv.Delay)
	case errors.Is(err, memory.ErrFailedOver), errors.Is(err, memory.ErrNotReplicated):
		// Extracted again as the same delivery (the span is not recorded).
		return runner.Wait(err)
	case errors.Is(err, ErrInjectionPending):
		// Not a failure: the injector's record is on its way (a wait
		// spends no delivery).
		return runner.Wait(err)
	case errors.As(err, &budget):
		return runner.RetryAfter(err, max(time.Until(budget.Until), time.Second))
	case errors.Is(err, llm.ErrUnavailable), errors.Is(err, llm.ErrModelMissing), errors.Is(err, memory.ErrUnavailable):
		return runner.Unavailable(err)
	case errors.Is(err, llm.ErrInvalidRequest), errors.Is(err, memory.ErrInvalid):
		return runner.Permanent(err)
	}
	return err
}
