package ollamae2e

import (
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestSummaryRoundTrip: the compactor's one summary call (no tools, no
// format, temperature 0.3, its output budget as num_predict) against the
// real server, on a transcript with tool calls and a failed result; the
// reply is cleaned, saved as the session's summary with its boundary, and
// the context rebuilt from it. The tiny model's words are nonsense: the
// test asserts the round trip, not the summary's content.
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
	t.Logf("tiny model summary (%d chars): %.200q", len(sum.Content), sum.Content)
}
