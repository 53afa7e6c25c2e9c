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
}

// Result says what a pass did.
type Result struct {
	Busy    bool // another replica holds the session's pass
	Empty   bool // nothing new since the cursor: no pass
	Verdict Verdict
	Pass    memory.Pass // the journal (Entries, Steps, tokens)
	Outcome Outcome     // the pass's totals
}

// Run runs (or resumes) the pass of one session, holding the session's
// lease. It returns at once with Busy when another replica holds it. A
// pass resumes from its journal: after a park (a new turn started), a
// model outage or a crash, whatever it already changed stays changed and
// its ledger goes on counting.
func (c *Consolidator) Run(ctx context.Context, req Request) (Result, error) {
	ref := memory.SessionRef{Tenant: req.Tenant, Project: req.Project, Session: req.Session}
	if err := memory.CheckSession(ref); err != nil {
		return Result{}, fmt.Errorf("consolidate: %w", err)
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
		var err error
		res, err = c.run(ctx, ref, req)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("consolidate: %w", err)
	}
	return res, nil
}

// open finds the session's unfinished pass (running: cut off; parked) or
// starts a new one.
func (c *Consolidator) open(ctx context.Context, ref memory.SessionRef, now time.Time) (*memory.Pass, *Ledger, bool, error) {
	for _, st := range []memory.PassStatus{memory.PassRunning, memory.PassParked} {
		ps, err := c.store.Passes(ctx, memory.PassQuery{Tenant: ref.Tenant, Project: ref.Project, Session: ref.Session, Status: st, Limit: 1})
		if err != nil {
			return nil, nil, false, fmt.Errorf("consolidate: open pass of %s: %w", ref, err)
		}
		if len(ps) == 0 {
			continue
		}
		rec := ps[0]
		l := &Ledger{}
		if len(rec.State) > 0 {
			if err := json.Unmarshal(rec.State, l); err != nil {
				// An unreadable ledger: the journal stands, the count restarts.
				l = &Ledger{}
			}
		}
		return &rec, l, true, nil
	}
	rec := &memory.Pass{ID: memory.NewID(), Tenant: ref.Tenant, Project: ref.Project, Session: ref.Session, Status: memory.PassRunning,
		StartedAt: now.UTC(), UpdatedAt: now.UTC()}
	return rec, &Ledger{}, false, nil
}

func (c *Consolidator) run(ctx context.Context, ref memory.SessionRef, req Request) (Result, error) {
	lim := c.cfg.Limits
	rec, l, resumed, err := c.open(ctx, ref, c.now())
	if err != nil {
		return Result{}, err
	}
	res := func(v Verdict) Result { return Result{Verdict: v, Pass: *rec, Outcome: l.Totals} }
	if parked, err := c.turnStarted(ctx, ref, req); err != nil || parked {
		if err != nil {
			return Result{}, err
		}
		if resumed && rec.Status != memory.PassParked {
			err := c.park(ctx, rec, l)
			return res(VerdictParked), err
		}
		return res(VerdictParked), nil
	}
	if behind, err := c.transcriptBehind(ctx, ref); err != nil || behind {
		if err == nil {
			err = ErrTranscriptBehind
		}
		return Result{}, err
	}
	cursor, err := c.store.Cursor(ctx, ref)
	if err != nil {
		return Result{}, fmt.Errorf("consolidate: cursor of %s: %w", ref, err)
	}
	msgs, err := c.store.Messages(ctx, ref, cursor, 0)
	if err != nil {
		return Result{}, fmt.Errorf("consolidate: transcript of %s: %w", ref, err)
	}
	w := c.buildWindow(msgs)
	if !resumed && w.Count == 0 {
		if w.Newest > cursor { // only tool messages: nothing to consolidate
			if _, err := c.store.AdvanceCursor(ctx, ref, w.Newest); err != nil {
				return Result{}, fmt.Errorf("consolidate: advance cursor of %s: %w", ref, err)
			}
		}
		return Result{Empty: true}, nil
	}
	rec.UpTo = max(rec.UpTo, w.Newest, cursor)
	rec.Status = memory.PassRunning
	p := &pass{c: c, ref: ref, rec: rec, l: l, seen: map[string]bool{}}
	for {
		if v := l.Verdict(lim); v != VerdictContinue {
			err := c.finish(ctx, rec, l, v, req.Cause)
			return res(v), err
		}
		if parked, err := c.turnStarted(ctx, ref, req); err != nil || parked {
			if err != nil {
				err = errors.Join(err, c.save(ctx, rec, l))
				return res(VerdictContinue), err
			}
			err := c.park(ctx, rec, l)
			return res(VerdictParked), err
		}
		p.now = c.now()
		memories, err := c.memoriesBlock(ctx, ref, p.now)
		if err != nil {
			return res(VerdictContinue), err
		}
		creq := llm.Request{Role: llm.RoleConsolidate, Project: ref.ProjectRef().String(), Messages: c.messages(w, memories, l, p.now),
			Tools: offered(l, lim), Timeout: c.cfg.CallTimeout}
		temp := c.cfg.Temperature
		creq.Temperature = &temp
		resp, err := c.chat.Chat(ctx, creq)
		rec.PromptTokens += resp.PromptTokens
		rec.CompletionTokens += resp.CompletionTokens
		if err != nil {
			// Nothing of this step happened: the ledger as saved after the
			// last step is where the pass resumes.
			err = errors.Join(fmt.Errorf("consolidate: model call for %s: %w", ref, err), c.save(ctx, rec, l))
			return res(VerdictContinue), err
		}
		calls := resp.Message.ToolCalls
		if len(calls) == 0 {
			l.RecordProse(resp.Message.Content)
		} else {
			tc := calls[0]
			key, r, err := p.call(ctx, tc, l)
			if err != nil {
				// What the call wrote before the store failed is journaled
				// (settled, or pending when the write's outcome is unknown).
				err = errors.Join(err, c.save(ctx, rec, l))
				return res(VerdictContinue), err
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
			return res(VerdictContinue), err
		}
	}
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
	pending, err := c.activity.TurnEndedPending(ctx, ref.Project, ref.Session)
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
// closed. Each step is idempotent and the journal is closed last, so a
// crash or a failed publish in between finds the pass still open on the
// next delivery and finishes it again (the event's id is the pass's: a
// second publish is dropped by the duplicate window). Closing the journal
// first lost consolidation_done: the redelivery found no open pass and
// nothing new after the cursor.
func (c *Consolidator) finish(ctx context.Context, rec *memory.Pass, l *Ledger, v Verdict, cause string) error {
	ref := memory.SessionRef{Tenant: rec.Tenant, Project: rec.Project, Session: rec.Session}
	if _, err := c.store.AdvanceCursor(ctx, ref, rec.UpTo); err != nil {
		return fmt.Errorf("consolidate: advance cursor of %s: %w", ref, err)
	}
	if err := c.publishDone(ctx, rec, l, v); err != nil {
		return err
	}
	rec.Status, rec.Verdict = memory.PassFinished, string(v)
	return c.save(ctx, rec, l)
}

// publishDone publishes the pass's consolidation_done (nothing without a
// publisher).
func (c *Consolidator) publishDone(ctx context.Context, rec *memory.Pass, l *Ledger, v Verdict) error {
	if c.pub == nil {
		return nil
	}
	t := l.Totals
	done := events.ConsolidationDone{UpTo: rec.UpTo, Steps: len(l.Steps), Changed: changed(rec), Reason: string(v), Pass: rec.ID,
		Stored: t.Stored, Revised: t.Revised, Forgotten: t.Forgotten, Linked: t.Linked, Duplicates: t.Duplicates, Held: t.Held,
		PromptTokens: rec.PromptTokens, CompletionTokens: rec.CompletionTokens}
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
