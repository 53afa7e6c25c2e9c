package compact_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/compact"
)

// Each kind of unusable reply is refused with its reason; a summary with
// the active task that is smaller than what it replaces passes.
func TestCheck(t *testing.T) {
	good := "## Active task\n\"Add the rollback step\"\n\n## Goal\nShip the deploy script.\n"
	for _, tc := range []struct {
		name          string
		reply         string
		cutOff        bool
		covered, prev int64
		want          compact.Refusal // "": accepted
	}{
		{"a summary", good, false, 500, 0, ""},
		{"an update", good, false, 10, 170, ""}, // prev: the previous summary's block
		{"cut off by the output limit", good, true, 500, 0, compact.RefusedCutOff},
		{"empty", " \n\t", false, 500, 0, compact.RefusedEmpty},
		{"only the block's markers", compact.SummaryOpen + compact.SummaryClose, false, 500, 0, compact.RefusedEmpty},
		{"ok", "ok", false, 500, 0, compact.RefusedMissingSection},
		{"Sure! Here is...", "Sure! Here is the summary of our conversation:", false, 500, 0, compact.RefusedMissingSection},
		{"an answer to the user", "To deploy, run `kubectl apply -f k8s/` and watch `kubectl rollout status deployment/web`.", false, 500, 0, compact.RefusedMissingSection},
		{"no active task", "## Goal\nShip it.\n\n## Completed actions\n1. Read deploy.sh - bash\n", false, 500, 0, compact.RefusedMissingSection},
		{"an empty active task", "## Active task\n\n## Goal\nShip it.\n", false, 500, 0, compact.RefusedMissingSection},
		{"not smaller than the messages", good, false, 15, 0, compact.RefusedNotSmaller},
		// What replaces the messages is the block, the summary in its frame.
		{"smaller than the messages, its block is not", good, false, compact.BlockTokens(good) - 1, 0, compact.RefusedNotSmaller},
		{"its block smaller than the messages", good, false, compact.BlockTokens(good) + 1, 0, ""},
		{"not smaller than messages and previous summary", good + strings.Repeat("More detail. ", 40), false, 80, 60, compact.RefusedNotSmaller},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := compact.Check(tc.reply, tc.cutOff, tc.covered, tc.prev)
			var re *compact.RefusedError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "" && s != strings.TrimSpace(tc.reply):
				t.Fatalf("summary %q", s)
			case tc.want != "" && (!errors.As(err, &re) || re.Reason != tc.want || !errors.Is(err, compact.ErrRefused) || s != ""):
				t.Fatalf("got %q, %v; want refused as %s", s, err, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), string(tc.want)):
				t.Fatalf("the error does not name the reason: %v", err)
			}
		})
	}
}

// Headings as small models write them count; chatter before the first
// section is dropped.
func TestCheckReadsHeadings(t *testing.T) {
	for _, reply := range []string{
		"# Active task\nFix it.",
		"### ACTIVE TASK:\nFix it.",
		"**Active task**\nFix it.",
		"**Active task:** Fix it.",
		"Active task: Fix it.",
		"Sure! Here is the summary:\n\n## Active task\nFix it.",
	} {
		s, err := compact.Check(reply, false, 1000, 0)
		if err != nil || strings.HasPrefix(s, "Sure") {
			t.Errorf("%q: %q %v", reply, s, err)
		}
	}
	// A heading in another language is not the template's.
	if _, err := compact.Check("## Tarea activa\nArreglarlo.", false, 1000, 0); !errors.Is(err, compact.ErrRefused) {
		t.Errorf("a translated heading passed: %v", err)
	}
}

// A chat assistant's reply under the right heading is not a summary
// ("## Active task\nSure! ..."); a summary whose sections quote or
// describe the work is, also when the user's own words open with "Sure".
func TestCheckRefusesAChatReplyUnderAHeading(t *testing.T) {
	const rest = "\n\n## Goal\nShip the deploy script.\n"
	for _, tc := range []struct {
		name, reply, said string
		refused           bool
	}{
		{"Sure! Here is", "## Active task\nSure! Here is the summary of our conversation so far." + rest, "", true},
		{"Sure! and an answer", "## Active task\nSure! Run `make deploy` and watch the rollout." + rest, "Deploy to production.", true},
		{"Certainly,", "## Active task\nCertainly, I can do that." + rest, "", true},
		{"happy to help", "## Active task\nI'd be happy to help with the deploy script!" + rest, "", true},
		{"let me summarise", "## Active task\nLet me summarize what we did." + rest, "", true},
		{"as an AI", "## Active task\nAs an AI, I cannot run commands." + rest, "", true},
		{"inline heading", "Active task: Sure! Here's a recap." + rest, "", true},
		{"another section", "## Active task\n\"Add the rollback step\"\n\n## Completed actions\nHere is the updated summary of the actions:\n1. Read deploy.sh - bash\n", "", true},
		{"Spanish", "## Active task\n¡Claro! Aquí tienes el resumen de la conversación." + rest, "", true},
		{"German", "## Active task\nNatürlich! Hier ist die Zusammenfassung." + rest, "", true},
		{"Chinese", "## Active task\n好的，以下是对话的摘要。" + rest, "", true},
		{"Russian", "## Active task\nКонечно! Вот краткое резюме." + rest, "", true},
		{"a word inside another", "## Active task\nSure, add the tests." + rest, "Please ensure the tests pass.", true},
		// Summaries.
		{"a quote of the user", "## Active task\n\"Sure, go ahead and add the tests.\"" + rest, "", false},
		{"the user's words unquoted", "## Active task\nSure, go ahead and add the tests." + rest, "Sure, go ahead and add the tests.", false},
		{"None", "## Active task\nNone" + rest, "", false},
		{"a description", "## Active task\nSurely the rollback must run before the migration: the user asked to add it." + rest, "", false},
		{"certify", "## Active task\nCertify the build before the release." + rest, "", false},
		{"here is what was asked", "## Active task\nHere is what the user asked: update the README's install section." + rest, "", false},
		{"first person handoff", "## Active task\n\"Add the rollback step\"\n\n## Remaining work\nI'll write the migration next, then run the tests.\n", "", false},
		{"numbered actions", "## Active task\nNone\n\n## Completed actions\n1. Ran go test ./... - ok - bash\n", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := compact.CheckSaid(tc.reply, false, 5000, 0, tc.said)
			var re *compact.RefusedError
			switch {
			case tc.refused && (!errors.As(err, &re) || re.Reason != compact.RefusedMissingSection || s != ""):
				t.Fatalf("accepted as a summary (%v): %q", err, s)
			case tc.refused && !strings.Contains(err.Error(), "chat reply"):
				t.Fatalf("refused without saying why: %v", err)
			case !tc.refused && err != nil:
				t.Fatalf("a summary refused: %v", err)
			}
		})
	}
	// Check (no transcript) refuses the chat opening whatever the user said.
	if _, err := compact.Check("## Active task\nSure! Run `make deploy`."+rest, false, 5000, 0); !errors.Is(err, compact.ErrRefused) {
		t.Fatalf("Check accepted a chat reply: %v", err)
	}
}
