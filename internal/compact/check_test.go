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
