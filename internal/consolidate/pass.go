package consolidate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// Request asks for a pass over one session.
type Request struct {
	Tenant  string // "": the default tenant
	Project string
	Session string
	// Cause is the session_idle event's id (empty for a pass run by hand).
	Cause string
	// IdleSince is the activity the idle event reported: a turn started
	// after it parks the pass. Zero: the time the pass starts.
	IdleSince time.Time
	// From, when positive, re-reads the session from message From (an
	// operator's repair, `engram consolidate -from N`): an open pass is
	// finished first, then the cursor is set back to From-1.
	From int64
}

// Result says what a run did: the passes it ran, oldest first, and the
// last one's verdict, journal and totals.
type Result struct {
	Busy    bool // another replica holds the session's pass
	Empty   bool // nothing new since the cursor: no pass
	Verdict Verdict
	Pass    memory.Pass // the last pass's journal (Entries, Steps, tokens)
	Outcome Outcome     // the last pass's totals
	// Passes are the journals of every pass the run ran or resumed.
	Passes []memory.Pass
	// Outcomes are their totals, one per pass.
	Outcomes []Outcome
}

func (r *Result) add(v Verdict, rec *memory.Pass, o Outcome) {
	r.Verdict, r.Pass, r.Outcome = v, *rec, o
	r.Passes, r.Outcomes = append(r.Passes, *rec), append(r.Outcomes, o)
}

// Run consolidates a session, holding its lease: pass after pass, each
// over the oldest messages after the cursor that fit one window, until
// no message is left after the cursor, a pass parks (a turn started) or
// an error stops it (the next delivery goes on from the cursor and the
// journal). It returns at once with Busy when another replica holds the
// session. A pass resumes from its journal: after a park, a model outage
// or a crash, whatever it already changed stays changed and its ledger
// goes on counting.
func (c *Consolidator) Run(ctx context.Context, req Request) (Result, error) {
	ref := memory.SessionRef{Tenant: req.Tenant, Project: req.Project, Session: req.Session}
	if err := memory.CheckSession(ref); err != nil {
		return Result{}, fmt.Errorf("consolidate: %w", err)
	}
	if req.From < 0 {
		return Result{}, fmt.Errorf("consolidate: from %d: %w: a message id is positive", req.From, memory.ErrInvalid)
	}
	if req.IdleSince.IsZero() {
		req.IdleSince = c.now()
	}
	owner := memory.NewID()
	ok, err := c.store.AcquireLease(ctx, ref, LeaseName, owner, c.cfg.LeaseTTL)
	if err != nil {
		return Result{}, fmt.Errorf("consolidate: acquire lease of %s: %w", ref, err)
	}
	if !ok {
		return Result{Busy: true}, nil
	}
	var res Result
	err = memory.HoldLease(ctx, c.store, ref, LeaseName, owner, c.cfg.LeaseTTL, func(ctx context.Context) error {
		return c.run(ctx, ref, req, &res)
	})
	if err != nil {
		return res, fmt.Errorf("consolidate: %w", err)
	}
	return res, nil
}

// open finds the session's unfinished pass (running: cut off; parked),
// nil when there is none.
func (c *Consolidator) open(ctx context.Context, ref memory.SessionRef) (*memory.Pass, *Ledger, error) {
	for _, st := range []memory.PassStatus{memory.PassRunning, memory.PassParked} {
		ps, err := c.store.Passes(ctx, memory.PassQuery{Tenant: ref.Tenant, Project: ref.Project, Session: ref.Session, Status: st, Limit: 1})
		if err != nil {
			return nil, nil, fmt.Errorf("consolidate: open pass of %s: %w", ref, err)
		}
		if len(ps) > 0 {
			return &ps[0], ledgerOf(&ps[0]), nil
		}
	}
	return nil, nil, nil
}

// ledgerOf decodes a pass's ledger; an unreadable one restarts the count
// (the journal stands).
func ledgerOf(rec *memory.Pass) *Ledger {
	l := &Ledger{}
	if len(rec.State) > 0 {
		if err := json.Unmarshal(rec.State, l); err != nil {
			l = &Ledger{}
		}
	}
	return l
}

// last is the pass a run ended last (nil: none in this run yet): the next
// pass reads its window again when it asked for a retry.
type last struct {
	rec *memory.Pass
	l   *Ledger
}

// run runs the passes of a session (see Run), adding each to res.
func (c *Consolidator) run(ctx context.Context, ref memory.SessionRef, req Request, res *Result) error {
	rec, l, err := c.open(ctx, ref)
	if err != nil {
		return err
	}
	resumed := rec != nil
	var prev *last
	if req.From > 0 {
		if rec != nil { // finish the open pass first: it may hold changes
			v, err := c.pass(ctx, ref, req, rec, l, true, res)
			if err != nil || v == VerdictParked {
				return err
			}
			rec, l = nil, nil
		}
		if err := c.rewind(ctx, ref, req.From); err != nil {
			return err
		}
		prev = &last{} // a fresh start: no earlier attempt counts
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if rec == nil {
			var st beginState
			rec, l, st, err = c.begin(ctx, ref, req, prev)
			switch {
			case err != nil:
				return err
			case st == beganNothing:
				res.Empty = len(res.Passes) == 0
				return nil
			case st == beganParked:
				if len(res.Passes) == 0 {
					res.Verdict = VerdictParked
				}
				return nil
			}
			resumed = false
		}
		v, err := c.pass(ctx, ref, req, rec, l, resumed, res)
		if err != nil || v == VerdictParked || v == VerdictContinue {
			return err
		}
		prev, rec, l = &last{rec: rec, l: l}, nil, nil
	}
}

// rewind sets the cursor back to from-1 for an operator's re-read.
func (c *Consolidator) rewind(ctx context.Context, ref memory.SessionRef, from int64) error {
	msgs, err := c.store.Messages(ctx, ref, from-1, 1)
	if err != nil {
		return fmt.Errorf("consolidate: transcript of %s: %w", ref, err)
	}
	if len(msgs) == 0 {
		return fmt.Errorf("consolidate: %s has no message %d or after it: %w", ref, from, memory.ErrInvalid)
	}
	if err := c.store.SetCursor(ctx, ref, from-1); err != nil {
		return fmt.Errorf("consolidate: set the cursor of %s back to %d: %w", ref, from-1, err)
	}
	return nil
}

// beginState is what begin found.
type beginState int

const (
	began        beginState = iota // a new pass
	beganNothing                   // nothing after the cursor to read
	beganParked                    // a turn started since the idle event
)

// begin starts a new pass over the oldest messages after the cursor
// (beganNothing when there is none to read: tool messages only are passed
// over). Its attempt counts the passes before it over the same window that
// asked for a retry (the last pass of this run, or at a run's start the
// session's newest pass); a retry's window holds half the messages the
// attempt before it showed.
func (c *Consolidator) begin(ctx context.Context, ref memory.SessionRef, req Request, prev *last) (*memory.Pass, *Ledger, beginState, error) {
	if parked, err := c.turnStarted(ctx, ref, req); err != nil || parked {
		return nil, nil, beganParked, err
	}
	if behind, err := c.transcriptBehind(ctx, ref); err != nil || behind {
		if err == nil {
			err = ErrTranscriptBehind
		}
		return nil, nil, began, err
	}
	cursor, err := c.store.Cursor(ctx, ref)
	if err != nil {
		return nil, nil, began, fmt.Errorf("consolidate: cursor of %s: %w", ref, err)
	}
	if prev == nil {
		ps, err := c.store.Passes(ctx, memory.PassQuery{Tenant: ref.Tenant, Project: ref.Project, Session: ref.Session, Limit: 1})
		if err != nil {
			return nil, nil, began, fmt.Errorf("consolidate: passes of %s: %w", ref, err)
		}
		prev = &last{}
		if len(ps) > 0 {
			prev = &last{rec: &ps[0], l: ledgerOf(&ps[0])}
		}
	}
	l := &Ledger{Start: cursor, Attempt: 1, Window: c.cfg.WindowMessages}
	now := c.now().UTC()
	if prev.rec != nil {
		if prev.l.Retry && prev.l.Start == cursor {
			l.Attempt, l.Window = prev.l.Attempt+1, max(1, prev.l.Shown/2)
		}
		// Passes are listed newest first: a pass starts after the one
		// before it, also on a clock that did not move.
		if !now.After(prev.rec.StartedAt) {
			now = prev.rec.StartedAt.Add(time.Millisecond)
		}
	}
	b, err := c.budget(ctx)
	if err != nil {
		return nil, nil, began, err
	}
	w, err := c.readWindow(ctx, ref, cursor, l.Window, b)
	if err != nil {
		return nil, nil, began, err
	}
	if w.Count == 0 {
		if w.Tail > cursor { // only tool messages: nothing to consolidate
			if _, err := c.store.AdvanceCursor(ctx, ref, w.Tail); err != nil {
				return nil, nil, began, fmt.Errorf("consolidate: advance cursor of %s: %w", ref, err)
			}
		}
		return nil, nil, beganNothing, nil
	}
	rec := &memory.Pass{ID: memory.NewID(), Tenant: ref.Tenant, Project: ref.Project, Session: ref.Session, Status: memory.PassRunning,
		StartedAt: now, UpdatedAt: now, From: w.From, UpTo: w.Newest}
	return rec, l, began, nil
}

// pass runs (or resumes) one pass to its end, a park or an error, and adds
// it to res. Its window is read from the pass's first message (a resumed
// pass sees the messages stored since, as far as the window reaches); the
// pass records the newest message it was shown, and the cursor moves
// there when it ends (see finish).
func (c *Consolidator) pass(ctx context.Context, ref memory.SessionRef, req Request, rec *memory.Pass, l *Ledger, resumed bool, res *Result) (Verdict, error) {
	lim := c.cfg.Limits
	end := func(v Verdict, err error) (Verdict, error) {
		res.add(v, rec, l.Totals)
		return v, err
	}
	if resumed {
		if parked, err := c.turnStarted(ctx, ref, req); err != nil || parked {
			if err != nil {
				return VerdictContinue, err
			}
			if rec.Status != memory.PassParked {
				return end(VerdictParked, c.park(ctx, rec, l))
			}
			return end(VerdictParked, nil)
		}
		if v := l.Verdict(lim); v != VerdictContinue {
			return end(v, c.finish(ctx, rec, l, v)) // it ended before a crash: finish it again
		}
		if behind, err := c.transcriptBehind(ctx, ref); err != nil || behind {
			if err == nil {
				err = ErrTranscriptBehind
			}
			return VerdictContinue, err
		}
	}
	if l.Attempt == 0 { // a pass begun before passes recorded their start
		cursor, err := c.store.Cursor(ctx, ref)
		if err != nil {
			return VerdictContinue, fmt.Errorf("consolidate: cursor of %s: %w", ref, err)
		}
		l.Start, l.Attempt, l.Window, rec.From = cursor, 1, c.cfg.WindowMessages, 0
	}
	start := l.Start
	if rec.From > 0 {
		start = rec.From - 1
	}
	budget, err := c.budget(ctx)
	if err != nil {
		return VerdictContinue, err
	}
	w, err := c.readWindow(ctx, ref, start, max(l.Window, 1), budget)
	if err != nil {
		return VerdictContinue, err
	}
	if w.Count > 0 {
		rec.From, rec.UpTo, l.Shown = w.From, w.Newest, w.Count
	}
	rec.Status = memory.PassRunning
	p := &pass{c: c, ref: ref, rec: rec, l: l, said: w.Said}
	for {
		if v := l.Verdict(lim); v != VerdictContinue {
			return end(v, c.finish(ctx, rec, l, v))
		}
		if parked, err := c.turnStarted(ctx, ref, req); err != nil || parked {
			if err != nil {
				return end(VerdictContinue, errors.Join(err, c.save(ctx, rec, l)))
			}
			return end(VerdictParked, c.park(ctx, rec, l))
		}
		p.now = c.now()
		memories, err := c.memoriesBlock(ctx, ref, l, p.now)
		if err != nil {
			return end(VerdictContinue, err)
		}
		creq := llm.Request{Role: llm.RoleConsolidate, Project: ref.ProjectRef().String(), Messages: c.messages(w, memories, l, p.now),
			Tools: offered(l, lim), Timeout: c.cfg.CallTimeout, ContextTokens: budget.Context, MaxTokens: budget.Reply}
		temp := c.cfg.Temperature
		creq.Temperature = &temp
		resp, err := c.chat.Chat(ctx, creq)
		rec.PromptTokens += resp.PromptTokens
		rec.CompletionTokens += resp.CompletionTokens
		if err != nil {
			// Nothing of this step happened: the ledger as saved after the
			// last step is where the pass resumes.
			return end(VerdictContinue, errors.Join(fmt.Errorf("consolidate: model call for %s: %w", ref, err), c.save(ctx, rec, l)))
		}
		calls := resp.Message.ToolCalls
		if len(calls) == 0 {
			l.RecordProse(resp.Message.Content)
		} else {
			tc := calls[0]
			key, r, err := p.callSettled(ctx, tc, l)
			if err != nil {
				// What the call wrote before the store failed is journaled
				// (settled, or pending when the write's outcome is unknown).
				return end(VerdictContinue, errors.Join(err, c.save(ctx, rec, l)))
			}
			if len(calls) > 1 {
				r.Summary += fmt.Sprintf(" (%d more calls ignored: one call per step)", len(calls)-1)
			}
			name := tc.Name
			if name == "" {
				name = "(unnamed)"
			}
			l.RecordCall(capChars(name, 40), key, r.Summary, r.Outcome, r.Cascade)
			l.Detail = r.Detail
		}
		if err := c.save(ctx, rec, l); err != nil {
			return end(VerdictContinue, err)
		}
	}
}

// budget shares the consolidation model's context window (the chat
// client's ContextLength, else Config.ContextTokens, else
// llm.DefaultContextLength); a window too small for a step's prompt is an
// invalid request (llm.ErrInvalidRequest: the event is dead-lettered with
// the reason, and replayed once the setting is fixed).
func (c *Consolidator) budget(ctx context.Context) (Budget, error) {
	window := c.cfg.window()
	if wt, ok := c.chat.(windowTeller); ok {
		n, err := wt.ContextLength(ctx, llm.RoleConsolidate)
		if err != nil {
			return Budget{}, fmt.Errorf("consolidate: context window: %w", err)
		}
		window = n
	}
	b := c.cfg.BudgetFor(window)
	if err := b.check(); err != nil {
		return b, fmt.Errorf("consolidate: %w: %w", llm.ErrInvalidRequest, err)
	}
	return b, nil
}

// turnStarted reports whether a turn started since the idle event.
func (c *Consolidator) turnStarted(ctx context.Context, ref memory.SessionRef, req Request) (bool, error) {
	if c.activity == nil {
		return false, nil
	}
	t, err := c.activity.LastTurnStarted(ctx, ref.Tenant, ref.Project, ref.Session)
	if err != nil {
		return false, fmt.Errorf("consolidate: activity of %s: %w: %w", ref, memory.ErrUnavailable, err)
	}
	return t.After(req.IdleSince), nil
}

// transcriptBehind reports whether a turn_ended of the session still
// waits for the extractor (ErrTranscriptBehind).
func (c *Consolidator) transcriptBehind(ctx context.Context, ref memory.SessionRef) (bool, error) {
	if c.activity == nil {
		return false, nil
	}
	pending, err := c.activity.TurnEndedPending(ctx, ref.Tenant, ref.Project, ref.Session)
	if err != nil {
		return false, fmt.Errorf("consolidate: pending turns of %s: %w: %w", ref, memory.ErrUnavailable, err)
	}
	return pending, nil
}

// save writes the journal with the ledger.
func (c *Consolidator) save(ctx context.Context, rec *memory.Pass, l *Ledger) error {
	state, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("consolidate: encode ledger: %w", err)
	}
	rec.State, rec.Steps, rec.UpdatedAt = state, len(l.Steps), c.now().UTC()
	// A cut-off context must not lose the step it just took.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.store.PutPass(sctx, *rec); err != nil {
		return fmt.Errorf("consolidate: save pass %s: %w", rec.ID, err)
	}
	return nil
}

// park saves the pass to be resumed at the next idle.
func (c *Consolidator) park(ctx context.Context, rec *memory.Pass, l *Ledger) error {
	rec.Status = memory.PassParked
	return c.save(ctx, rec, l)
}

// finish ends the pass: the cursor moves to the newest message it read
// (never back), consolidation_done is published, and the journal is
// closed. A pass that ended stuck or over budget with attempts left does
// not move the cursor: it asks for a retry (Ledger.Retry), and the next
// pass reads its window again, halved; on its last attempt the cursor
// moves past its window anyway and the verdict is skipped. Each step is
// idempotent and the journal is closed last, so a crash or a failed
// publish in between finds the pass still open on the next delivery and
// finishes it again (the event's id is the pass's: a second publish is
// dropped by the duplicate window). Closing the journal first lost
// consolidation_done: the redelivery found no open pass and nothing new
// after the cursor.
func (c *Consolidator) finish(ctx context.Context, rec *memory.Pass, l *Ledger, v Verdict) error {
	ref := memory.SessionRef{Tenant: rec.Tenant, Project: rec.Project, Session: rec.Session}
	if v == VerdictStuck || v == VerdictBudget {
		if l.Attempt < c.cfg.Attempts {
			l.Retry = true
		} else {
			l.Skipped, v = true, VerdictSkipped
		}
	}
	cursor := l.Start
	if !l.Retry {
		var err error
		if cursor, err = c.store.AdvanceCursor(ctx, ref, rec.UpTo); err != nil {
			return fmt.Errorf("consolidate: advance cursor of %s: %w", ref, err)
		}
	} else if cur, err := c.store.Cursor(ctx, ref); err == nil {
		cursor = cur
	}
	if err := c.publishDone(ctx, rec, l, v, cursor); err != nil {
		return err
	}
	if rec.Status != memory.PassFinished && c.obs != nil {
		c.obs.ConsolidationPass(string(v), rec.UpTo-rec.From+1)
	}
	rec.Status, rec.Verdict = memory.PassFinished, string(v)
	return c.save(ctx, rec, l)
}

// publishDone publishes the pass's consolidation_done (nothing without a
// publisher); cursor is the session's cursor after the pass.
func (c *Consolidator) publishDone(ctx context.Context, rec *memory.Pass, l *Ledger, v Verdict, cursor int64) error {
	if c.pub == nil {
		return nil
	}
	t := l.Totals
	done := events.ConsolidationDone{UpTo: max(cursor, 0), From: rec.From, Steps: len(l.Steps), Changed: changed(rec), Reason: string(v), Pass: rec.ID,
		Stored: t.Stored, Revised: t.Revised, Forgotten: t.Forgotten, Linked: t.Linked, Duplicates: t.Duplicates, Held: t.Held,
		Restored: t.Restored, PromptTokens: rec.PromptTokens, CompletionTokens: rec.CompletionTokens}
	ev := events.New(events.Ref{TenantID: rec.Tenant, ProjectID: rec.Project, SessionID: rec.Session}, done)
	ev.ID = "consolidation-" + rec.ID
	if err := c.pub.Publish(ctx, ev); err != nil {
		return fmt.Errorf("consolidate: publish consolidation_done: %w", err)
	}
	return nil
}

// changed lists the node ids a pass wrote, once each, in order.
func changed(rec *memory.Pass) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range rec.Entries {
		if e.Op == memory.OpHold { // held for review: nothing was written
			continue
		}
		for _, id := range []string{e.NodeID, e.NewID} {
			if id != "" && !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}
