package ollamae2e

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/tools/tinymodel/tiny"
)

// summarySession stores three turns with tool calls and a failed result.
func summarySession(t *testing.T, ctx context.Context) (memory.Store, memory.SessionRef) {
	t.Helper()
	st := storetest.OpenSQLite(t)
	ref := memory.SessionRef{Project: "p1", Session: "s1"}
	for i, text := range []string{"Fix the deploy script.", "Add a rollback step.", "Run the tests."} {
		turn := string(rune('1' + i))
		_, _, err := st.AppendTranscript(ctx, ref, "t"+turn, []memory.Message{
			{Role: memory.RoleUser, Content: text},
			{Role: memory.RoleAssistant, Content: "Checking.", ToolCalls: []memory.ToolCall{{ID: "c" + turn, Name: "bash", Arguments: `{"cmd":"make test"}`}}},
			{Role: memory.RoleTool, ToolName: "bash", ToolCallID: "c" + turn, ToolStatus: memory.ToolFailed, Content: "exit status 2\n" + strings.Repeat("--- FAIL: TestDeploy (0.01s)\n", 40)},
			{Role: memory.RoleAssistant, Content: "The tests fail; looking into it."},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return st, ref
}

// TestSummaryCallIsChecked: the compactor's summary call (no tools, no
// format, temperature 0.3, its budget as num_predict, the window as
// num_ctx with truncate=false) against the real server. The tiny model
// writes nonsense, which is no summary: it is refused with a reason and
// nothing is saved; the context stays the whole conversation.
func TestSummaryCallIsChecked(t *testing.T) {
	c := client(t)
	ctx := ctxT(t)
	st, ref := summarySession(t, ctx)
	cc, err := compact.New(st, c, nil, compact.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	res, err := cc.Compact(ctx, compact.Report{EventID: "e1", Project: ref.Project, Session: ref.Session, Force: true})
	var refused *compact.RefusedError
	if !errors.As(err, &refused) || res.Window != tiny.Context || res.Steps != 1 {
		t.Fatalf("the tiny model's reply as a summary: %+v, %v", res, err)
	}
	t.Logf("refused (%s): %s", refused.Reason, refused.Detail)
	if _, err := st.LatestSummary(ctx, ref); !memory.IsNotFound(err) {
		t.Fatalf("a refused reply was saved: %v", err)
	}
	got, err := cc.Context(ctx, events.Ref{ProjectID: ref.Project, SessionID: ref.Session}, events.ContextRequest{})
	if err != nil || got.Block != "" || len(got.Messages) != 12 {
		t.Fatalf("context after a refusal: block %q, %d messages, %v", got.Block, len(got.Messages), err)
	}
}

// playedSummary plays a model that can summarise: the call goes to the
// real server, and its reply's text is replaced by a summary (the tiny
// model's words are nonsense).
type playedSummary struct{ c *llm.Client }

func (p playedSummary) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	resp, err := p.c.Chat(ctx, req)
	if err != nil {
		return resp, err
	}
	resp.Message.Content = "## Active task\n\"Run the tests.\"\n\n## Blocked\nmake test: exit status 2 (TestDeploy)."
	resp.DoneReason = "stop"
	return resp, nil
}

func (p playedSummary) ContextLength(ctx context.Context, role llm.Role) (int, error) {
	return p.c.ContextLength(ctx, role)
}

// TestSummaryRoundTrip: with a summary the check accepts, it is saved with
// its boundary and the context (Compactor.Context, what the context API
// returns) is rebuilt from it: the block around the summary and the
// messages after the boundary with their tool calls and results.
func TestSummaryRoundTrip(t *testing.T) {
	c := client(t)
	ctx := ctxT(t)
	st, ref := summarySession(t, ctx)
	cc, err := compact.New(st, playedSummary{c}, nil, compact.Defaults())
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
	if !strings.HasPrefix(sum.Content, "## Active task") || sum.UpTo != 4 {
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
}

// TestContextWindow: the window comes from the model's own metadata
// (/api/show: the tiny model's llama.context_length) unless a setting
// lowers it; the real server refuses a prompt over num_ctx (truncate=false)
// instead of dropping its start, and the client reports
// ErrContextExceeded.
func TestContextWindow(t *testing.T) {
	c := client(t)
	ctx := ctxT(t)
	if n, err := c.ModelContextLength(ctx, chatModel); err != nil || n != tiny.Context {
		t.Fatalf("model context length %d %v, want %d", n, err, tiny.Context)
	}
	if n, err := c.ContextLength(ctx, llm.RoleSummarize); err != nil || n != tiny.Context {
		t.Fatalf("summarize window %d %v, want %d", n, err, tiny.Context)
	}
	small := client(t, func(cfg *llm.Config) { cfg.Extract.ContextLength = 1024 })
	if n, err := small.ContextLength(ctx, llm.RoleExtract); err != nil || n != 1024 {
		t.Fatalf("a set window: %d %v", n, err)
	}
	long := strings.Repeat("The deploy fails at the migration step. ", 200) // 8,000 bytes: over 1,024 tokens
	_, err := small.Chat(ctx, llm.Request{Role: llm.RoleExtract, Messages: []llm.Message{llm.User(long)}, MaxTokens: 8})
	if !errors.Is(err, llm.ErrContextExceeded) || !errors.Is(err, llm.ErrInvalidRequest) {
		t.Fatalf("a prompt over num_ctx: %v, want ErrContextExceeded", err)
	}
	resp, err := small.Chat(ctx, llm.Request{Role: llm.RoleExtract, Messages: []llm.Message{llm.User("Fix the deploy.")}, MaxTokens: 8})
	if err != nil {
		t.Fatalf("a prompt that fits: %v", err)
	}
	t.Logf("a prompt that fits: %d prompt tokens, done %q", resp.PromptTokens, resp.DoneReason)
}
