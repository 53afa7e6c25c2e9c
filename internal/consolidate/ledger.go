package consolidate

import (
	"fmt"
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
	o.Recalled += b.Recalled
	o.Failed += b.Failed
}

// Wrote reports whether the outcome changed memory.
func (o Outcome) Wrote() bool {
	return o.Stored+o.Revised+o.Forgotten+o.Linked+o.Unlinked > 0
}

func (o Outcome) String() string {
	var parts []string
	for _, c := range []struct {
		n    int
		name string
	}{{o.Stored, "stored"}, {o.Revised, "revised"}, {o.Forgotten, "forgotten"}, {o.Linked, "linked"},
		{o.Unlinked, "unlinked"}, {o.Duplicates, "duplicate refused"}, {o.Held, "held for review"},
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
}

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
	l.Steps = append(l.Steps, Step{Tool: tool, Key: key, Summary: oneLine(summary), Outcome: o})
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
	l.Prose = capChars(oneLine(text), 300)
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
		b.WriteString(l.Journal())
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
	if len(l.Cascade) > 0 {
		d.Text += "\nThe fact you just changed is linked to these live memories; revise or forget any that depended on it:\n" + strings.Join(l.Cascade, "\n")
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

// Journal lists the steps, one line each.
func (l *Ledger) Journal() string {
	if len(l.Steps) == 0 {
		return "(no steps yet)"
	}
	var b strings.Builder
	for i, s := range l.Steps {
		if i > 0 {
			b.WriteByte('\n')
		}
		if s.Tool == "" {
			fmt.Fprintf(&b, "%d. %s", i+1, s.Summary)
			continue
		}
		fmt.Fprintf(&b, "%d. %s: %s -> %s", i+1, s.Tool, s.Summary, s.Outcome)
	}
	return b.String()
}

// Digest is the ledger's short account for the trailing message: steps used
// of the budget, the totals and the last few steps.
func (l *Ledger) Digest(lim Limits) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Steps used: %d of %d. So far: %s.", len(l.Steps), lim.Budget, l.Totals)
	if l.RecallsSinceProgress > 0 {
		fmt.Fprintf(&b, " Recalls in a row: %d of %d.", l.RecallsSinceProgress, lim.RecallLimit)
	}
	start := max(0, len(l.Steps)-6)
	for i := start; i < len(l.Steps); i++ {
		s := l.Steps[i]
		if s.Tool == "" {
			fmt.Fprintf(&b, "\n%d. %s", i+1, s.Summary)
		} else {
			fmt.Fprintf(&b, "\n%d. %s: %s -> %s", i+1, s.Tool, s.Summary, s.Outcome)
		}
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func capChars(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(0, n-1)]) + "…"
}
