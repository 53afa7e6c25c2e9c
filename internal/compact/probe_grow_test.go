package compact_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
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
// smaller than what it replaces. Fixed: Check measures the summary's
// block, and a compaction that would replace no more than the smallest
// block is not attempted (TooSmall).
func TestProbeCompactionNeverGrowsTheContext(t *testing.T) {
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
	t.Logf("%s up to message %d: %d -> %d tokens; %v", res.Outcome, res.UpTo, res.TokensBefore, res.TokensAfter, err)
	if res.Outcome == compact.Compacted && res.TokensAfter >= res.TokensBefore {
		t.Fatalf("compacted up to message %d: %d -> %d tokens (the block: %d tokens for a summary of %d)", res.UpTo, res.TokensBefore, res.TokensAfter,
			(len(compact.Block(reply))+3)/4, (len(reply)+3)/4)
	}
	if err != nil && !strings.Contains(err.Error(), string(compact.RefusedNotSmaller)) {
		t.Fatalf("Compact: %v", err)
	}
}

// A conversation larger than the smallest block, so the model is asked,
// and a reply whose summary is smaller than the messages but whose block
// is not: refused (not_smaller), nothing saved.
func TestSummaryWhoseBlockIsLargerIsRefused(t *testing.T) {
	f := newFixture(t, sqliteOnly)
	for i := 1; i <= 10; i++ {
		msgs := []memory.Message{
			{Role: memory.RoleUser, Content: fmt.Sprintf("Step %d: refactor the billing module, part %d, and keep the ledger tables untouched please.", i, i)},
			{Role: memory.RoleAssistant, Content: fmt.Sprintf("Refactored part %d of the billing module; the tests pass and the ledger tables are untouched.", i)},
		}
		if _, _, err := f.st.AppendTranscript(f.ctx, sref(), fmt.Sprintf("t%d", i), msgs); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := f.st.Messages(f.ctx, sref(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	covered := compact.Tokens(msgs[:compact.Split(msgs, f.cfg.KeepRecent)])
	// A summary 10 tokens smaller than the messages it covers.
	reply := "## Active task\n\"Step 8: refactor the billing module\"\n\n## Constraints and preferences\n"
	for int64(llm.EstimateTokens(reply+"- keep the ledger tables untouched\n")) < covered-10 {
		reply += "- keep the ledger tables untouched\n"
	}
	f.srv.OnChatAlways(nil, llmtest.Text(reply))
	r := f.report(0, 0)
	r.Force = true
	res, err := f.c.Compact(f.ctx, r)
	summary := llm.EstimateTokens(reply)
	if err == nil || !strings.Contains(err.Error(), string(compact.RefusedNotSmaller)) {
		t.Fatalf("%s up to message %d: %d -> %d tokens, %v; want refused (not_smaller): a summary of %d tokens in a block of %d for %d tokens of messages",
			res.Outcome, res.UpTo, res.TokensBefore, res.TokensAfter, err, summary, compact.BlockTokens(reply), covered)
	}
	if _, err := f.st.LatestSummary(f.ctx, sref()); !memory.IsNotFound(err) {
		t.Fatalf("a refused summary was saved: %v", err)
	}
	if len(f.srv.Chats()) == 0 {
		t.Fatal("the model was not asked")
	}
}

// The estimate a compaction starts from is the context the platform gets
// (the context API's tokens: the previous block and the messages after
// it), and a second compaction leaves it smaller.
func TestSecondCompactionCountsThePreviousBlock(t *testing.T) {
	f := newFixture(t, sqliteOnly)
	f.srv.OnChatAlways(nil, llmtest.Text(summaryText("Add the rollback step")))
	for i := 0; i < 4; i++ {
		f.turn(fmt.Sprintf("Step %d of the deploy script.", i))
	}
	r := f.report(0, 0)
	r.Force = true
	if res := f.compact(r); res.Outcome != compact.Compacted {
		t.Fatalf("first compaction: %+v", res)
	}
	for i := 4; i < 8; i++ {
		f.turn(fmt.Sprintf("Step %d of the deploy script.", i))
	}
	ctx, err := f.c.Context(f.ctx, events.Ref{ProjectID: project, SessionID: session}, events.ContextRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r = f.report(0, 0)
	r.Force = true
	res := f.compact(r)
	if res.Outcome != compact.Compacted || res.TokensBefore != ctx.Tokens || res.TokensAfter >= res.TokensBefore {
		t.Fatalf("second compaction: %s, %d -> %d tokens; the context held %d", res.Outcome, res.TokensBefore, res.TokensAfter, ctx.Tokens)
	}
}

// A conversation whose covered messages are smaller than any summary's
// block is not sent to the model: TooSmall, no failure, nothing saved.
func TestCompactionThatCannotShrinkIsNotAttempted(t *testing.T) {
	f := newFixture(t, sqliteOnly)
	for i := 1; i <= 4; i++ {
		msgs := []memory.Message{{Role: memory.RoleUser, Content: fmt.Sprintf("Step %d.", i)}, {Role: memory.RoleAssistant, Content: "Done."}}
		if _, _, err := f.st.AppendTranscript(f.ctx, sref(), fmt.Sprintf("t%d", i), msgs); err != nil {
			t.Fatal(err)
		}
	}
	f.srv.OnChatAlways(nil, llmtest.Text("## Active task\nNone"))
	r := f.report(0, 0)
	r.Force = true
	res := f.compact(r)
	if res.Outcome != compact.TooSmall || len(f.srv.Chats()) != 0 {
		t.Fatalf("%s after %d model calls, want %s and none", res.Outcome, len(f.srv.Chats()), compact.TooSmall)
	}
	if _, err := f.st.LatestSummary(f.ctx, sref()); !memory.IsNotFound(err) {
		t.Fatalf("a summary was saved: %v", err)
	}
}
