package compact_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/internal/runner/dlq"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

func sqliteOnly(t testing.TB) memory.Store { return storetest.OpenSQLite(t) }

// refusals counts CompactionRefused by reason (compact.Metrics).
type refusals struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *refusals) CompactionRefused(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[reason]++
}

func (r *refusals) count(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[reason]
}

// Through the worker: a forced compaction whose summary the model gets
// wrong every time (each kind of unusable reply) is retried with the
// backoff, then dead-lettered with the reason; the previous summary, the
// context the platform gets and ENGRAM_OUT stay as they were.
func TestRefusedSummaryChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply llmtest.Reply
		want  compact.Refusal
	}{
		{"empty", llmtest.Text(""), compact.RefusedEmpty},
		{"ok", llmtest.Text("ok"), compact.RefusedMissingSection},
		{"an answer to the user", llmtest.Text("Sure! To deploy, run `kubectl apply -f k8s/` and then watch the rollout with `kubectl rollout status deployment/web`."), compact.RefusedMissingSection},
		{"cut off by the output limit", llmtest.Truncated(summaryText("Add the rollback step")), compact.RefusedCutOff},
		{"a chat reply under the heading", llmtest.Text("## Active task\nSure! To deploy, run `kubectl apply -f k8s/` and watch the rollout.\n\n## Goal\nDeploy."), compact.RefusedMissingSection},
		{"no active task", llmtest.Text("## Goal\nShip the deploy script.\n\n## Completed actions\n1. Read deploy.sh - bash\n"), compact.RefusedMissingSection},
		{"larger than what it replaces", llmtest.Text(summaryText("Add the rollback step") + strings.Repeat("## Critical context\nThe deploy uses kubectl.\n", 120)), compact.RefusedNotSmaller},
	} {
		t.Run(tc.name, func(t *testing.T) {
			metrics := &refusals{}
			l := newLoopWith(t, sqliteOnly, func(c *compact.Config) { c.Backoff = []time.Duration{20 * time.Millisecond} }, compact.WithMetrics(metrics))
			for range 3 {
				l.turn("How do we deploy?")
			}
			l.srv.OnChat(nil, llmtest.Text(summaryText("Fix the deploy")))
			force := l.report(0, 0)
			force.Force = true
			if res := l.compact(force); res.Outcome != compact.Compacted {
				t.Fatalf("first compaction: %+v", res)
			}
			for range 3 {
				l.turn("Now add a rollback step.")
			}
			ref := events.Ref{ProjectID: project, SessionID: session}
			before, err := l.client.Context(l.ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			prev := l.summary()
			outBefore := l.streamCount(events.StreamOut)
			calls := l.srv.Calls("/api/chat")

			l.srv.OnChatAlways(nil, tc.reply)
			ev, err := l.client.PublishTokensReported(l.ctx, ref, events.TokensReported{Force: true})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the dead letter", func() bool { return l.streamCount(events.StreamDLQ) == 1 })
			letters, err := dlq.NewStore(l.js, events.StreamDLQ).List(l.ctx, 0, 10)
			if err != nil || len(letters) != 1 {
				t.Fatalf("letters %+v %v", letters, err)
			}
			if lt := letters[0]; lt.MsgID != ev.ID || !strings.Contains(lt.Reason, "summary refused ("+string(tc.want)+")") ||
				!strings.Contains(lt.Reason, "4 failures") || !strings.Contains(lt.Reason, "the previous summary stays") {
				t.Fatalf("dead letter %s: %q", lt.MsgID, lt.Reason)
			}
			if n := l.srv.Calls("/api/chat") - calls; n != 4 {
				t.Fatalf("%d summary calls, want 4 (the first and 3 retries)", n)
			}
			if n := metrics.count(string(tc.want)); n != 4 {
				t.Fatalf("refusals metric %s = %d, want 4", tc.want, n)
			}
			if got := l.summary(); got.Content != prev.Content || got.UpTo != prev.UpTo || !got.CreatedAt.Equal(prev.CreatedAt) {
				t.Fatalf("the summary changed: %+v, was %+v", got, prev)
			}
			after, err := l.client.Context(l.ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if after.Block != before.Block || after.UpTo != before.UpTo || len(after.Messages) != len(before.Messages) || after.Tokens != before.Tokens {
				t.Fatalf("the context changed: up to %d, %d messages; was %d, %d", after.UpTo, len(after.Messages), before.UpTo, len(before.Messages))
			}
			if n := l.streamCount(events.StreamOut); n != outBefore {
				t.Fatalf("%d events on ENGRAM_OUT, was %d", n, outBefore)
			}
		})
	}
}

// previousSummaryRE finds the previous summary in an update prompt.
var previousSummaryRE = regexp.MustCompile(`(?s)<previous-summary>\n(.*)\n</previous-summary>`)

// An update's budget counts the previous summary: a summary of 8,000
// tokens updated with 2,000 tokens of new messages gets room for itself.
// Before, the budget was 20% of the new messages (the 2,000 floor): the
// server cut the update there and the cut text replaced the summary.
func TestUpdateBudgetCountsThePreviousSummary(t *testing.T) {
	f := newFixture(t, sqliteOnly)
	for range 2 {
		f.turn("How do we deploy?")
	}
	var b strings.Builder
	b.WriteString("## Active task\n\"Fix the deploy\"\n\n## Completed actions\n")
	for i := 1; b.Len() < 32000; i++ {
		fmt.Fprintf(&b, "%d. Ran the deploy check %d against staging (kubectl rollout status) - ok - bash\n", i, i)
	}
	prev := b.String()
	if err := f.st.SaveSummary(f.ctx, sref(), memory.Summary{Content: prev, UpTo: 8, TokensBefore: 90000, TokensAfter: 9000}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		f.turn("Add a rollback step and run the checks again.")
	}
	// The model rewrites the whole summary and adds the new action.
	f.srv.OnChatAlways(nil, llmtest.Func(func(req api.ChatRequest) llmtest.Reply {
		m := previousSummaryRE.FindStringSubmatch(req.Messages[len(req.Messages)-1].Content)
		if m == nil {
			return llmtest.ServerError("no previous summary in the prompt")
		}
		return llmtest.Text(m[1] + "999. Added the rollback step - ok - edit_file\n")
	}))
	force := f.report(0, 0)
	force.Force = true
	res := f.compact(force)
	if res.Outcome != compact.Compacted || res.Steps != 1 {
		t.Fatalf("result %+v", res)
	}
	got := f.summary()
	if !strings.HasPrefix(got.Content, "## Active task") || !strings.HasSuffix(got.Content, "999. Added the rollback step - ok - edit_file") || got.UpTo != res.UpTo {
		t.Fatalf("the update was cut: %d characters, ends %q", len(got.Content), got.Content[max(0, len(got.Content)-80):])
	}
	req := f.srv.Chats()[0]
	np, _ := req.Chat.Options["num_predict"].(float64)
	prevTokens := int64(len(prev) / 4)
	if int64(np) < prevTokens {
		t.Fatalf("num_predict %v for a %d-token previous summary", np, prevTokens)
	}
	if req.Cut || req.PromptTokens+int(np) > req.NumCtx {
		t.Fatalf("prompt %d + reply %v over num_ctx %d", req.PromptTokens, np, req.NumCtx)
	}
}

// Through the worker: a forced compaction of 600,000 characters (5,000
// messages; before: one 594,000-character prompt) is done in steps that
// each fit the summarize model's window, which the compactor learns from
// Ollama's /api/show: every request sends it as num_ctx and fits it, every
// covered message is in exactly one prompt, in order, and each step
// updates the summary of the one before.
func TestLargeCompactionInSteps(t *testing.T) {
	const window = 16384
	l := newLoop(t, sqliteOnly)
	l.srv.SetContextLength(llmtest.ChatModel, window)
	pad := strings.Repeat("x", 90)
	var total int
	for i := 1; i <= 1250; i++ {
		turn := fmt.Sprintf("t%04d", i)
		msgs := []memory.Message{
			{Role: memory.RoleUser, Content: fmt.Sprintf("[m%04da] Please run step %d of the migration. %s", i, i, pad)},
			{Role: memory.RoleAssistant, Content: fmt.Sprintf("[m%04db] Running it. %s", i, pad), ToolCalls: []memory.ToolCall{{ID: "c1", Name: "bash", Arguments: `{"cmd":"make migrate"}`}}},
			{Role: memory.RoleTool, ToolName: "bash", ToolCallID: "c1", ToolStatus: memory.ToolOK, Content: fmt.Sprintf("[m%04dc] migrated %s", i, pad)},
			{Role: memory.RoleAssistant, Content: fmt.Sprintf("[m%04dd] Step %d is done. %s", i, i, pad)},
		}
		for _, m := range msgs {
			total += len(m.Content) + len(m.ToolCalls)*len(`{"cmd":"make migrate"}`)
		}
		if _, _, err := l.st.AppendTranscript(l.ctx, sref(), turn, msgs); err != nil {
			t.Fatal(err)
		}
	}
	if total < 600000 {
		t.Fatalf("%d characters stored, want 600,000", total)
	}
	// The summary names the last message the step saw.
	marker := regexp.MustCompile(`\[m(\d{4})([abcd])\]`)
	l.srv.OnChatAlways(nil, llmtest.Func(func(req api.ChatRequest) llmtest.Reply {
		p := req.Messages[len(req.Messages)-1].Content
		t := p[strings.Index(p, "<transcript>"):]
		all := marker.FindAllString(t, -1)
		if len(all) == 0 {
			return llmtest.ServerError("no messages in the prompt")
		}
		return llmtest.Text(fmt.Sprintf("## Active task\n\"Run the migration\"\n\n## Completed actions\n1. Migrated up to %s - bash\n", all[len(all)-1]))
	}))
	ref := events.Ref{ProjectID: project, SessionID: session}
	if _, err := l.client.PublishTokensReported(l.ctx, ref, events.TokensReported{Force: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "compaction_done", func() bool { return l.streamCount(events.StreamOut) == 1 })
	if n := l.streamCount(events.StreamDLQ); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
	sum := l.summary()
	// 5,000 messages, keep-recent 6: message 4,995 walks back to the user
	// message 4,993, so the summary covers 1-4,992.
	if sum.UpTo != 4992 {
		t.Fatalf("summary up to %d, want 4992", sum.UpTo)
	}
	reqs := l.srv.Chats()
	if len(reqs) < 10 {
		t.Fatalf("%d summary calls for 600,000 characters in a %d-token window", len(reqs), window)
	}
	next := 1 // every covered message, once, in order
	var lastSummary string
	for k, r := range reqs {
		np, _ := r.Chat.Options["num_predict"].(float64)
		if r.NumCtx != window || r.Cut || r.PromptTokens+int(np) > r.NumCtx {
			t.Fatalf("request %d: num_ctx %d, prompt %d + reply %v, cut %v", k, r.NumCtx, r.PromptTokens, np, r.Cut)
		}
		p := r.Chat.Messages[len(r.Chat.Messages)-1].Content
		if k > 0 && !strings.Contains(p, "<previous-summary>\n"+lastSummary+"\n</previous-summary>") {
			t.Fatalf("request %d does not update the summary of request %d", k, k-1)
		}
		tr := p[strings.Index(p, "<transcript>"):]
		for _, m := range marker.FindAllStringSubmatch(tr, -1) {
			id := 0
			fmt.Sscanf(m[1], "%d", &id)
			want := (id-1)*4 + int(m[2][0]-'a') + 1
			if want != next {
				t.Fatalf("request %d shows message %d (%s) where message %d was due", k, want, m[0], next)
			}
			next++
		}
		lastSummary = fmt.Sprintf("## Active task\n\"Run the migration\"\n\n## Completed actions\n1. Migrated up to %s - bash", marker.FindAllString(tr, -1)[len(marker.FindAllString(tr, -1))-1])
	}
	if next != 4993 {
		t.Fatalf("the prompts showed messages 1-%d, want 1-4992", next-1)
	}
	if sum.Content != lastSummary {
		t.Fatalf("saved %q, the last step answered %q", sum.Content, lastSummary)
	}
	t.Logf("%d characters in %d steps; largest prompt %d tokens of %d", total, len(reqs), maxPrompt(reqs), window)
}

func maxPrompt(reqs []llmtest.Request) int {
	n := 0
	for _, r := range reqs {
		n = max(n, r.PromptTokens)
	}
	return n
}

// Through the worker: a platform that numbers tool calls per turn ("c1"
// in every turn). Before, every "c1" result paired with the first turn's
// call and the boundary fell to message 1 ("compacted up to message 1:
// 634 -> 796 tokens").
func TestReusedToolCallIDsThroughTheWorker(t *testing.T) {
	l := newLoop(t, sqliteOnly)
	for i := 1; i <= 5; i++ {
		turn := fmt.Sprintf("t%d", i)
		if _, _, err := l.st.AppendTranscript(l.ctx, sref(), turn, []memory.Message{
			{Role: memory.RoleUser, Content: fmt.Sprintf("Run check %d on the deploy script.", i)},
			{Role: memory.RoleAssistant, Content: "Running it.", ToolCalls: []memory.ToolCall{{ID: "c1", Name: "bash", Arguments: fmt.Sprintf(`{"cmd":"./check.sh %d"}`, i)}}},
			{Role: memory.RoleTool, ToolName: "bash", ToolCallID: "c1", ToolStatus: memory.ToolOK, Content: fmt.Sprintf("check %d passed\n", i) + grepOutput},
			{Role: memory.RoleAssistant, Content: fmt.Sprintf("Check %d passed.", i)},
		}); err != nil {
			t.Fatal(err)
		}
	}
	l.srv.OnChatAlways(nil, llmtest.Text(summaryText("Run the checks")))
	ref := events.Ref{ProjectID: project, SessionID: session}
	if _, err := l.client.PublishTokensReported(l.ctx, ref, events.TokensReported{Force: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "compaction_done", func() bool { return l.streamCount(events.StreamOut) == 1 })
	// 20 messages, keep-recent 6: message 15 walks back to the user
	// message 13; the summary covers 1-12.
	if s := l.summary(); s.UpTo != 12 {
		t.Fatalf("summary up to %d, want 12", s.UpTo)
	}
	p := l.lastPrompt()
	if strings.Contains(p, "interrupted") || strings.Count(p, "-> tool call bash (id c1)") != 3 {
		t.Fatalf("the prompt pairs the calls wrongly:\n%s", p)
	}
	got, err := l.client.Context(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 8 || got.Messages[0].Role != events.RoleUser || got.Messages[0].ID != 13 ||
		len(got.Messages[1].ToolCalls) != 1 || got.Messages[2].ToolCallID != "c1" {
		t.Fatalf("context after the boundary: %+v", got.Messages)
	}
}
