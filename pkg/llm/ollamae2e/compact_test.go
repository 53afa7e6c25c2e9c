package ollamae2e

import (
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestSummaryRoundTrip: the compactor's one summary call (no tools, no
// format, temperature 0.3, its output budget as num_predict) against the
// real server, on a transcript with tool calls and a failed result; the
// reply is cleaned, saved as the session's summary with its boundary, and
// the context (Compactor.Context, what the context API returns) is rebuilt
// from it: the block around the summary and the messages after the
// boundary with their tool calls and results. The tiny model's words are
// nonsense: the test asserts the round trip, not the summary's content.
func TestSummaryRoundTrip(t *testing.T) {
	c := client(t)
	st := storetest.OpenSQLite(t)
	ctx := ctxT(t)
	ref := memory.SessionRef{Project: "p1", Session: "s1"}
	for i, text := range []string{"Fix the deploy script.", "Add a rollback step.", "Run the tests."} {
		turn := string(rune('1' + i))
		_, _, err := st.AppendTranscript(ctx, ref, "t"+turn, []memory.Message{
			{Role: memory.RoleUser, Content: text},
			{Role: memory.RoleAssistant, Content: "Checking.", ToolCalls: []memory.ToolCall{{ID: "c" + turn, Name: "bash", Arguments: `{"cmd":"make test"}`}}},
			{Role: memory.RoleTool, ToolName: "bash", ToolCallID: "c" + turn, ToolStatus: memory.ToolFailed, Content: "exit status 2"},
			{Role: memory.RoleAssistant, Content: "The tests fail; looking into it."},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	cc, err := compact.New(st, c, nil, compact.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	res, err := cc.Compact(ctx, compact.Report{EventID: "e1", Project: ref.Project, Session: ref.Session, Force: true})
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	if res.Outcome != compact.Compacted || res.UpTo != 4 || res.Kept != 8 {
		t.Fatalf("result %+v", res)
	}
	sum, err := st.LatestSummary(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(sum.Content) == "" || sum.UpTo != 4 || strings.Contains(sum.Content, compact.SummaryOpen) {
		t.Fatalf("summary %+v", sum)
	}
	got, err := cc.Context(ctx, events.Ref{ProjectID: ref.Project, SessionID: ref.Session}, events.ContextRequest{})
	if err != nil {
		t.Fatalf("context: %v", err)
	}
	if got.UpTo != 4 || got.Summary != sum.Content || got.Block != compact.Block(sum.Content) ||
		!strings.HasPrefix(got.Block, compact.Preamble) || !strings.HasSuffix(got.Block, compact.EndMarker) {
		t.Fatalf("context block: up to %d, block %.300q", got.UpTo, got.Block)
	}
	if len(got.Messages) != 8 || got.Messages[0].ID != 5 || got.Messages[0].Role != events.RoleUser ||
		got.Messages[0].Content != "Add a rollback step." {
		t.Fatalf("context messages: %+v", got.Messages)
	}
	if call, res := got.Messages[1], got.Messages[2]; len(call.ToolCalls) != 1 || call.ToolCalls[0].ID != "c2" ||
		res.ToolCallID != "c2" || res.ToolStatus != events.ToolFailed {
		t.Fatalf("context lost a tool call or its result: %+v, %+v", call, res)
	}
	t.Logf("tiny model summary (%d chars): %.200q", len(sum.Content), sum.Content)
}
