package consolidate

import (
	"fmt"
	"slices"
	"strings"
)

// Limits are the ledger's bounds (issue 20's defaults: DefaultLimits).
type Limits struct {
	Budget      int // steps before the pass is told to finish (12); it stops one step past it
	MaxNudges   int // prose answers nudged before the pass is stopped (2)
	RecallLimit int // recalls in a row without another action before recall is withdrawn (3)
}

// DefaultLimits returns the limits of issue 20.
func DefaultLimits() Limits { return Limits{Budget: 12, MaxNudges: 2, RecallLimit: 3} }

// Outcome counts what one step (or a whole pass) did.
type Outcome struct {
	Stored     int `json:"stored,omitempty"`
	Revised    int `json:"revised,omitempty"`
	Forgotten  int `json:"forgotten,omitempty"`
	Linked     int `json:"linked,omitempty"`
	Unlinked   int `json:"unlinked,omitempty"`
	Duplicates int `json:"duplicates,omitempty"` // remember refused: the memory already holds it
	Held       int `json:"held,omitempty"`       // remember held a near-duplicate for review
	Restored   int `json:"restored,omitempty"`   // remember made a forgotten or closed memory live again
	Recalled   int `json:"recalled,omitempty"`   // memories a recall returned
	Failed     int `json:"failed,omitempty"`     // calls that could not be applied
}

func (o *Outcome) add(b Outcome) {
	o.Stored += b.Stored
	o.Revised += b.Revised
	o.Forgotten += b.Forgotten
	o.Linked += b.Linked
	o.Unlinked += b.Unlinked
	o.Duplicates += b.Duplicates
	o.Held += b.Held
	o.Restored += b.Restored
	o.Recalled += b.Recalled
	o.Failed += b.Failed
}

// Wrote reports whether the outcome changed memory.
func (o Outcome) Wrote() bool {
	return o.Stored+o.Revised+o.Forgotten+o.Linked+o.Unlinked+o.Restored > 0
}

func (o Outcome) String() string {
	var parts []string
	for _, c := range []struct {
		n    int
		name string
	}{{o.Stored, "stored"}, {o.Revised, "revised"}, {o.Forgotten, "forgotten"}, {o.Linked, "linked"},
		{o.Unlinked, "unlinked"}, {o.Restored, "restored"}, {o.Duplicates, "duplicate refused"}, {o.Held, "held for review"},
		{o.Recalled, "recalled"}, {o.Failed, "failed"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.name))
		}
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, ", ")
}

// Step is one step as the ledger records it.
type Step struct {
	Tool    string  `json:"tool,omitempty"` // empty: the model answered in prose
	Key     string  `json:"key,omitempty"`  // the call's argument key (repeat detection)
	Summary string  `json:"summary"`        // one line
	Outcome Outcome `json:"outcome"`
}

// Ledger is the runtime that counts: it records each step of a pass and
// decides the directive of the next step and whether the pass goes on. A
// rebuilt-identical context gives a stuck model no way to notice it is
// stuck; the ledger notices for it. It is plain data (saved with a parked
// pass) and has no clock and no I/O.
type Ledger struct {
	Steps []Step `json:"steps,omitempty"`
	// RecallsSinceProgress counts recalls in a row; any other tool resets it.
	RecallsSinceProgress int  `json:"recalls_since_progress,omitempty"`
	Acted                bool `json:"acted,omitempty"` // the last step called a tool
	Finished             bool `json:"finished,omitempty"`
	Nudges               int  `json:"nudges,omitempty"`
	PendingNudge         bool `json:"pending_nudge,omitempty"`
	// Prose is what the model last said instead of calling a tool.
	Prose string `json:"prose,omitempty"`
	// Cascade lists the live memories linked to a fact the last step
	// revised or forgot, shown with the next directive.
	Cascade []string `json:"cascade,omitempty"`
	// Detail is what the last call returned beyond its summary (a
	// recall's memories, the memory a near-duplicate resembles), shown to
	// the next step only. The caller sets it after RecordCall.
	Detail string `json:"detail,omitempty"`
	// Held are the normalised texts (NormaliseFact) that remember held
	// for review in this pass: confirm_similar is honoured only for one
	// of them, so a model cannot skip the review by setting it up front.
	Held   []string `json:"held,omitempty"`
	Totals Outcome  `json:"totals"`

	// IDs are the memories shown to the model in this pass, in the order
	// first shown: the model names IDs[k-1] as [fk] (ShortID), never by
	// its stored id, and the runtime maps the short id back (Resolve).
	IDs  []string       `json:"ids,omitempty"`
	byID map[string]int // IDs' index, rebuilt on demand

	// Start is the cursor the pass began from, Attempt its count among
	// the passes over that window (1: the first), and Retry says that the
	// pass ended stuck or over budget with attempts left: the cursor
	// stayed, the next pass reads the window again. Skipped says that it
	// ended so on its last attempt and the cursor moved past its window
	// anyway.
	Start   int64 `json:"start,omitempty"`
	Attempt int   `json:"attempt,omitempty"`
	Retry   bool  `json:"retry,omitempty"`
	Skipped bool  `json:"skipped,omitempty"`
	// Window is the most messages the pass's window may show (its
	// attempt's: WindowMessages, then half of what the attempt before
	// showed), Shown how many it showed.
	Window int `json:"window,omitempty"`
	Shown  int `json:"shown,omitempty"`
}

// ShortID is the short id [fk] the model knows a memory by in this pass
// (k from 1, in the order first shown). Small models copy "f3" reliably
// where they garble 24 hex digits.
func (l *Ledger) ShortID(id string) string {
	l.index()
	k, ok := l.byID[id]
	if !ok {
		l.IDs = append(l.IDs, id)
		k = len(l.IDs)
		l.byID[id] = k
	}
	return fmt.Sprintf("f%d", k)
}

// Resolve maps a short id the model gave ("f3", "[f3]", " F3 ") back to
// the memory's id; false when the pass showed no such memory.
func (l *Ledger) Resolve(short string) (string, bool) {
	s := strings.ToLower(strings.Trim(strings.TrimSpace(short), "[] "))
	if len(s) < 2 || s[0] != 'f' {
		return "", false
	}
	k := 0
	for _, r := range s[1:] {
		if r < '0' || r > '9' || k > len(l.IDs) {
			return "", false
		}
		k = k*10 + int(r-'0')
	}
	if k < 1 || k > len(l.IDs) {
		return "", false
	}
	return l.IDs[k-1], true
}

func (l *Ledger) index() {
	if len(l.byID) == len(l.IDs) && l.byID != nil {
		return
	}
	l.byID = make(map[string]int, len(l.IDs))
	for i, id := range l.IDs {
		l.byID[id] = i + 1
	}
}

// Bounds of what the ledger repeats to the model (EstimateTokens).
const (
	SummaryTokens = 60  // a step's one-line summary
	ProseTokens   = 80  // what the model said instead of calling a tool
	JournalTokens = 360 // the journal a nudge repeats (its newest steps)
)

// maxHeld bounds Held (a pass holds at most one text a step).
const maxHeld = 64

// Hold records that remember held norm for review.
func (l *Ledger) Hold(norm string) {
	if l.WasHeld(norm) {
		return
	}
	if len(l.Held) >= maxHeld {
		l.Held = l.Held[1:]
	}
	l.Held = append(l.Held, norm)
}

// WasHeld reports whether an earlier step of the pass held norm.
func (l *Ledger) WasHeld(norm string) bool {
	for _, h := range l.Held {
		if h == norm {
			return true
		}
	}
	return false
}

// The tools' names.
const (
	ToolRecall   = "memory_recall"
	ToolRemember = "memory_remember"
	ToolRevise   = "memory_revise"
	ToolForget   = "memory_forget"
	ToolLink     = "memory_link"
	ToolUnlink   = "memory_unlink"
	ToolDone     = "memory_done"
)

// RecordCall records a step that called tool with argument key.
func (l *Ledger) RecordCall(tool, key, summary string, o Outcome, cascade []string) {
	l.Steps = append(l.Steps, Step{Tool: tool, Key: key, Summary: capTokens(oneLine(summary), SummaryTokens), Outcome: o})
	l.Totals.add(o)
	l.Acted = true
	l.PendingNudge = false
	l.Prose = ""
	l.Cascade = cascade
	l.Detail = ""
	if tool == ToolRecall {
		l.RecallsSinceProgress++
	} else {
		l.RecallsSinceProgress = 0
	}
	if tool == ToolDone {
		l.Finished = true
	}
}

// RecordProse records a step in which the model called no tool.
func (l *Ledger) RecordProse(text string) {
	summary := "answered in prose, called no tool"
	l.Steps = append(l.Steps, Step{Summary: summary})
	l.Acted = false
	l.Nudges++
	l.PendingNudge = true
	l.Prose = capTokens(capChars(oneLine(text), 300), ProseTokens)
	l.Cascade = nil
	l.Detail = ""
}

// RecallBlocked reports whether recall is withdrawn: RecallLimit recalls in
// a row without another action.
func (l *Ledger) RecallBlocked(lim Limits) bool { return l.RecallsSinceProgress >= lim.RecallLimit }

// Repeated reports whether the last two steps made the same call.
func (l *Ledger) Repeated() bool {
	n := len(l.Steps)
	if n < 2 {
		return false
	}
	a, b := l.Steps[n-2], l.Steps[n-1]
	return a.Tool != "" && a.Tool == b.Tool && a.Key == b.Key
}

// DirectiveKind names which rule chose the directive.
type DirectiveKind string

// The directives, most specific first.
const (
	DirectiveFinished DirectiveKind = "finished"
	DirectiveBudget   DirectiveKind = "budget"
	DirectiveNudge    DirectiveKind = "nudge"
	DirectiveRecall   DirectiveKind = "recall_blocked"
	DirectiveRepeat   DirectiveKind = "repeat"
	DirectiveWork     DirectiveKind = "work"
)

// Directive is what the next step is told to do.
type Directive struct {
	Kind DirectiveKind
	Text string
}

// Directive returns the directive for the next step, the most specific
// rule first: finished, budget spent, a pending nudge, recall blocked, the
// same call twice in a row, else the work directive (which leads with the
// way out, memory_done). A cascade listing is appended while the pass is
// not over.
func (l *Ledger) Directive(lim Limits) Directive {
	d := l.directive(lim)
	if d.Kind != DirectiveFinished && len(l.Cascade) > 0 {
		d.Text += "\n" + cascadeHeader + "\n" + strings.Join(l.Cascade, "\n")
	}
	return d
}

// cascadeHeader introduces the cascade listing.
const cascadeHeader = "The fact you just changed is linked to these live memories; revise or forget any that depended on it:"

// directive is Directive without the cascade listing (the step's note fits
// the listing to the context).
func (l *Ledger) directive(lim Limits) Directive {
	var d Directive
	switch {
	case l.Finished:
		return Directive{DirectiveFinished, "The pass is over. Call nothing."}
	case len(l.Steps) >= lim.Budget:
		d = Directive{DirectiveBudget, fmt.Sprintf("The step budget (%d) is spent: call %s now. Nothing already stored is lost.", lim.Budget, ToolDone)}
	case l.PendingNudge:
		var b strings.Builder
		b.WriteString("You answered in prose; nobody reads it. Only a tool call moves anything.")
		if l.Prose != "" {
			fmt.Fprintf(&b, " You said: %q.", l.Prose)
		}
		b.WriteString(" Your journal so far:\n")
		b.WriteString(l.journalTail(JournalTokens))
		fmt.Fprintf(&b, "\nCall one memory tool now, or %s if nothing is left to change.", ToolDone)
		if l.Nudges >= lim.MaxNudges {
			b.WriteString(" This is the last prompt: another answer without a tool call ends the pass.")
		}
		d = Directive{DirectiveNudge, b.String()}
	case l.RecallBlocked(lim):
		d = Directive{DirectiveRecall, fmt.Sprintf("Inspection is over: %d recalls in a row. Decide now: remember, revise, forget or link what the conversation established, or call %s.", l.RecallsSinceProgress, ToolDone)}
	case l.Repeated():
		d = Directive{DirectiveRepeat, fmt.Sprintf("You made the same call twice; the answer has not changed. Do something different or finish with %s.", ToolDone)}
	default:
		d = Directive{DirectiveWork, fmt.Sprintf("If memory already matches the conversation, call %s. Otherwise make the next single change: remember what the conversation established, revise what it overturned, forget what was wrong, split a bundled fact (pieces first), link a durable topic.", ToolDone)}
	}
	return d
}

// Verdict is why a pass stopped, or "" while it goes on.
type Verdict string

// The verdicts.
const (
	VerdictContinue Verdict = ""
	VerdictDone     Verdict = "done"   // the model called memory_done
	VerdictStuck    Verdict = "stuck"  // the model kept answering in prose
	VerdictBudget   Verdict = "budget" // one step past the budget
	VerdictParked   Verdict = "parked" // a new turn started: resumed at the next idle
	// VerdictSkipped: the pass ended stuck or over budget on its last
	// attempt (Config.Attempts) over its window; the cursor moved past the
	// window anyway, and the window's messages were not consolidated.
	VerdictSkipped Verdict = "skipped"
)

// Verdict decides at a step's end: finished -> stop (done); no tool called
// -> nudge, stop when the nudges exceed the maximum; otherwise stop one step
// past the budget.
func (l *Ledger) Verdict(lim Limits) Verdict {
	switch {
	case l.Finished:
		return VerdictDone
	case len(l.Steps) > 0 && !l.Acted:
		if l.Nudges > lim.MaxNudges {
			return VerdictStuck
		}
		if len(l.Steps) > lim.Budget {
			return VerdictBudget
		}
		return VerdictContinue
	case len(l.Steps) > lim.Budget:
		return VerdictBudget
	}
	return VerdictContinue
}

// stepLine is one step of the journal.
func (l *Ledger) stepLine(i int) string {
	s := l.Steps[i]
	if s.Tool == "" {
		return fmt.Sprintf("%d. %s", i+1, s.Summary)
	}
	return fmt.Sprintf("%d. %s: %s -> %s", i+1, s.Tool, s.Summary, s.Outcome)
}

// Journal lists the steps, one line each.
func (l *Ledger) Journal() string {
	if len(l.Steps) == 0 {
		return "(no steps yet)"
	}
	lines := make([]string, len(l.Steps))
	for i := range l.Steps {
		lines[i] = l.stepLine(i)
	}
	return strings.Join(lines, "\n")
}

// journalTail is the journal's newest steps within n tokens (the older
// ones counted, "(steps 1-4 above)").
func (l *Ledger) journalTail(n int) string {
	if len(l.Steps) == 0 {
		return "(no steps yet)"
	}
	var lines []string
	used := cutNoteTokens
	i := len(l.Steps) - 1
	for ; i >= 0; i-- {
		line := l.stepLine(i)
		t := EstimateTokens(line) + 1
		if used+t > n && len(lines) > 0 {
			break
		}
		used += t
		lines = append(lines, line)
	}
	slices.Reverse(lines)
	if i >= 0 {
		lines = append([]string{fmt.Sprintf("(steps 1-%d not repeated)", i+1)}, lines...)
	}
	return strings.Join(lines, "\n")
}

// DigestSteps is how many of the newest steps the digest lists.
const DigestSteps = 6

// Digest is the ledger's short account for the trailing message: steps used
// of the budget, the totals and the last few steps.
func (l *Ledger) Digest(lim Limits) string {
	return strings.Join(append([]string{l.digestHead(lim)}, l.digestSteps()...), "\n")
}

func (l *Ledger) digestHead(lim Limits) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Steps used: %d of %d. So far: %s.", len(l.Steps), lim.Budget, l.Totals)
	if l.RecallsSinceProgress > 0 {
		fmt.Fprintf(&b, " Recalls in a row: %d of %d.", l.RecallsSinceProgress, lim.RecallLimit)
	}
	return b.String()
}

func (l *Ledger) digestSteps() []string {
	var out []string
	for i := max(0, len(l.Steps)-DigestSteps); i < len(l.Steps); i++ {
		out = append(out, l.stepLine(i))
	}
	return out
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func capChars(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(0, n-1)]) + "…"
}
