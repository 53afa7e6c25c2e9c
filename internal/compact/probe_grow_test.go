package compact_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// Issue #30 quoted "compacted up to message 4: 120 -> 243 tokens": a
// compaction that leaves the context larger than it was. The check now
// compares the summary with the messages it covers, but what replaces them
// is the block (the summary in its ~110-token frame, Block), which the
// check does not count: a forced compaction of a short conversation still
// grows the context (the probe of 2026-12-06, engram serve -model demo:
// "compacted up to message 10: 347 -> 431 tokens"). The compaction should
// be refused (not_smaller) or not attempted when the block cannot be
// smaller than what it replaces.
func TestProbeCompactionNeverGrowsTheContext(t *testing.T) {
	t.Skip("probe: reproduces a compaction that grows the context (347 -> 431 tokens: the check counts the summary, not its block's frame); fix pending")
	f := newFixture(t, sqliteOnly)
	for i := 1; i <= 6; i++ {
		msgs := []memory.Message{
			{Role: memory.RoleUser, Content: fmt.Sprintf("Step %d: refactor the billing module, part %d, and keep the ledger tables untouched please.", i, i)},
			{Role: memory.RoleAssistant, Content: fmt.Sprintf("Refactored part %d of the billing module; the tests pass and the ledger tables are untouched.", i)},
		}
		if _, _, err := f.st.AppendTranscript(f.ctx, sref(), fmt.Sprintf("t%d", i), msgs); err != nil {
			t.Fatal(err)
		}
	}
	// A well-formed summary, smaller than the messages it covers.
	reply := "## Active task\n\"Step 4: refactor the billing module\"\n\n## Constraints and preferences\n- keep the ledger tables untouched\n"
	f.srv.OnChatAlways(nil, llmtest.Text(reply))
	r := f.report(0, 0)
	r.Force = true
	res, err := f.c.Compact(f.ctx, r)
	if res.Outcome == compact.Compacted && res.TokensAfter >= res.TokensBefore {
		t.Fatalf("compacted up to message %d: %d -> %d tokens (the block: %d tokens for a summary of %d)", res.UpTo, res.TokensBefore, res.TokensAfter,
			(len(compact.Block(reply))+3)/4, (len(reply)+3)/4)
	}
	if err != nil && !strings.Contains(err.Error(), string(compact.RefusedNotSmaller)) {
		t.Fatalf("Compact: %v", err)
	}
}
