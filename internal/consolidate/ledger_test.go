package consolidate

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDirectivePrecedence(t *testing.T) {
	lim := DefaultLimits()
	recall := func(l *Ledger, key string) { l.RecordCall(ToolRecall, key, "recall "+key, Outcome{Recalled: 1}, nil) }

	// Each case sets up the conditions of its own rule and of every rule
	// below it, so the expected kind is the most specific one.
	cases := []struct {
		name  string
		setup func(l *Ledger)
		want  DirectiveKind
	}{
		{"work", func(l *Ledger) {}, DirectiveWork},
		{"repeat", func(l *Ledger) {
			l.RecordCall(ToolForget, `{"id":"a"}`, "forget a", Outcome{Failed: 1}, nil)
			l.RecordCall(ToolForget, `{"id":"a"}`, "forget a", Outcome{Failed: 1}, nil)
		}, DirectiveRepeat},
		{"recall blocked over repeat", func(l *Ledger) {
			recall(l, "x")
			recall(l, "x")
			recall(l, "x")
		}, DirectiveRecall},
		{"nudge over recall blocked", func(l *Ledger) {
			recall(l, "x")
			recall(l, "y")
			recall(l, "z")
			l.RecordProse("I think we are fine.")
		}, DirectiveNudge},
		{"budget over nudge", func(l *Ledger) {
			for range lim.Budget - 1 {
				recall(l, "x")
			}
			l.RecordProse("hmm")
		}, DirectiveBudget},
		{"finished over budget", func(l *Ledger) {
			for range lim.Budget {
				recall(l, "x")
			}
			l.RecordCall(ToolDone, "{}", "done", Outcome{}, nil)
		}, DirectiveFinished},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var l Ledger
			c.setup(&l)
			d := l.Directive(lim)
			if d.Kind != c.want {
				t.Fatalf("directive %s (%q), want %s", d.Kind, d.Text, c.want)
			}
		})
	}
}

func TestDirectiveTexts(t *testing.T) {
	lim := DefaultLimits()
	var l Ledger
	d := l.Directive(lim)
	if !strings.HasPrefix(d.Text, "If memory already matches the conversation, call memory_done") {
		t.Errorf("work directive does not lead with the way out: %q", d.Text)
	}
	l.RecordCall(ToolRemember, `{"text":"x"}`, "stored x", Outcome{Stored: 1}, nil)
	l.RecordProse("All good, I stored it.")
	d = l.Directive(lim)
	for _, want := range []string{"Only a tool call moves anything", "1. memory_remember: stored x -> 1 stored", `"All good, I stored it."`} {
		if !strings.Contains(d.Text, want) {
			t.Errorf("nudge %q lacks %q", d.Text, want)
		}
	}
	if strings.Contains(d.Text, "last prompt") {
		t.Errorf("first nudge says last prompt: %q", d.Text)
	}
	l.RecordProse("Still fine.")
	if d = l.Directive(lim); !strings.Contains(d.Text, "This is the last prompt") {
		t.Errorf("second nudge (max 2) is not the last prompt: %q", d.Text)
	}
	var f Ledger
	f.RecordCall(ToolDone, "{}", "done", Outcome{}, nil)
	if d = f.Directive(lim); d.Text != "The pass is over. Call nothing." {
		t.Errorf("finished: %q", d.Text)
	}
}

func TestCascadeListedOnce(t *testing.T) {
	lim := DefaultLimits()
	var l Ledger
	l.RecordCall(ToolForget, `{"id":"a"}`, "forgot a", Outcome{Forgotten: 1}, []string{"[b] depends on a"})
	if d := l.Directive(lim); d.Kind != DirectiveWork || !strings.Contains(d.Text, "[b] depends on a") {
		t.Fatalf("cascade not listed: %+v", d)
	}
	l.RecordCall(ToolRemember, `{"text":"c"}`, "stored c", Outcome{Stored: 1}, nil)
	if d := l.Directive(lim); strings.Contains(d.Text, "[b]") {
		t.Fatalf("cascade listed after the next step: %q", d.Text)
	}
}

func TestVerdicts(t *testing.T) {
	lim := DefaultLimits()
	t.Run("done", func(t *testing.T) {
		var l Ledger
		l.RecordCall(ToolRemember, "k", "s", Outcome{Stored: 1}, nil)
		if v := l.Verdict(lim); v != VerdictContinue {
			t.Fatalf("after a remember: %q", v)
		}
		l.RecordCall(ToolDone, "{}", "done", Outcome{}, nil)
		if v := l.Verdict(lim); v != VerdictDone {
			t.Fatalf("after done: %q", v)
		}
	})
	t.Run("nudge then abort", func(t *testing.T) {
		var l Ledger
		for i := 1; i <= lim.MaxNudges; i++ {
			l.RecordProse("prose")
			if v := l.Verdict(lim); v != VerdictContinue {
				t.Fatalf("nudge %d stopped the pass: %q", i, v)
			}
		}
		l.RecordProse("prose")
		if v := l.Verdict(lim); v != VerdictStuck {
			t.Fatalf("nudges past the maximum: %q", v)
		}
	})
	t.Run("a tool call clears the pending nudge", func(t *testing.T) {
		var l Ledger
		l.RecordProse("prose")
		l.RecordCall(ToolRecall, "q", "s", Outcome{}, nil)
		if l.PendingNudge || l.Directive(lim).Kind == DirectiveNudge {
			t.Fatal("nudge still pending after a tool call")
		}
	})
	t.Run("budget", func(t *testing.T) {
		var l Ledger
		for i := 1; i <= lim.Budget; i++ {
			l.RecordCall(ToolRemember, string(rune('a'+i)), "s", Outcome{Stored: 1}, nil)
			if v := l.Verdict(lim); v != VerdictContinue {
				t.Fatalf("step %d stopped: %q", i, v)
			}
		}
		if d := l.Directive(lim); d.Kind != DirectiveBudget || !strings.Contains(d.Text, "Nothing already stored is lost") {
			t.Fatalf("at the budget: %+v", d)
		}
		l.RecordCall(ToolRemember, "late", "s", Outcome{Stored: 1}, nil)
		if v := l.Verdict(lim); v != VerdictBudget {
			t.Fatalf("one step past the budget: %q", v)
		}
	})
}

func TestRecallCounting(t *testing.T) {
	lim := DefaultLimits()
	var l Ledger
	for i := range 3 {
		if l.RecallBlocked(lim) {
			t.Fatalf("blocked after %d recalls", i)
		}
		l.RecordCall(ToolRecall, string(rune('a'+i)), "s", Outcome{}, nil)
	}
	if !l.RecallBlocked(lim) {
		t.Fatal("not blocked after 3 recalls")
	}
	l.RecordCall(ToolLink, "k", "s", Outcome{Linked: 1}, nil)
	if l.RecallBlocked(lim) || l.RecallsSinceProgress != 0 {
		t.Fatal("another tool did not reset the recall count")
	}
}

func TestRepeatNeedsSameKey(t *testing.T) {
	var l Ledger
	l.RecordCall(ToolRecall, "a", "s", Outcome{}, nil)
	l.RecordCall(ToolRecall, "b", "s", Outcome{}, nil)
	if l.Repeated() {
		t.Fatal("different keys count as a repeat")
	}
	l.RecordProse("x")
	l.RecordProse("x")
	if l.Repeated() {
		t.Fatal("two prose steps count as a repeated call")
	}
}

func TestLedgerRoundTrip(t *testing.T) {
	var l Ledger
	l.RecordCall(ToolRecall, "a", "s", Outcome{Recalled: 2}, []string{"[x] y"})
	l.RecordProse("hello")
	l.Hold("the user likes tea")
	data, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var back Ledger
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	lim := DefaultLimits()
	if back.Directive(lim) != l.Directive(lim) || back.Digest(lim) != l.Digest(lim) || back.Verdict(lim) != l.Verdict(lim) {
		t.Fatalf("round trip changed the ledger: %+v vs %+v", back, l)
	}
	if !back.WasHeld("the user likes tea") || back.WasHeld("the user likes coffee") {
		t.Fatalf("held texts after the round trip: %q", back.Held)
	}
}
