package demo

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/pkg/llm"
)

// client starts a demo model and returns the real model client configured
// for it, as serve -model demo configures its workers'.
func client(t *testing.T) *llm.Client {
	t.Helper()
	d, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	cfg := llm.DefaultConfig()
	cfg.Embed.Name = "some-embedder"
	d.Configure(&cfg)
	if cfg.Extract.Name != Model || cfg.Summarize.Name != Model || cfg.Consolidate.Name != Model || cfg.Embed.Name != "" {
		t.Fatalf("configured: %+v", cfg)
	}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rd, err := c.Check(context.Background()); err != nil {
		t.Fatalf("readiness: %+v %v", rd, err)
	}
	return c
}

// TestExtraction: the user's rules become standing preferences (global
// when they are about the user in general), decisions and failures become
// memories, "remember that" is left to consolidation, small talk is
// nothing, and every injected memory is judged.
func TestExtraction(t *testing.T) {
	c := client(t)
	p := extract.Prompt{
		Injected: []extract.Shown{{ID: "m1", Subkind: "preference", Text: "Use pnpm."}},
		Transcript: "USER: Never use yarn here, we use pnpm. Always answer in British English. Remember that staging is on port 5433.\n" +
			"ASSISTANT: The deploy failed because the migrations timed out.\n" +
			"USER: We decided to keep prices in cents. What time is it?",
	}
	r, _, err := llm.Structured[extract.Reply](context.Background(), c, llm.Request{Role: llm.RoleExtract, Messages: p.Messages()})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Verdicts) != 1 || r.Verdicts[0].ID != "m1" || r.Verdicts[0].Verdict != "used" {
		t.Errorf("verdicts: %+v", r.Verdicts)
	}
	got := map[string]extract.ReplyMemory{}
	for _, m := range r.Memories {
		got[m.Label] = m
	}
	for label, want := range map[string][3]string{
		"Never use yarn here, we use pnpm.":                   {"preference", "user", "project"},
		"Always answer in British English.":                   {"preference", "user", "global"},
		"We decided to keep prices in cents.":                 {"decision", "user", "project"},
		"The deploy failed because the migrations timed out.": {"failure", "assistant", "project"},
	} {
		m, ok := got[label]
		if !ok || m.Subkind != want[0] || m.AssertedBy != want[1] || m.Scope != want[2] {
			t.Errorf("%q: %+v (found %v), want %v", label, m, ok, want)
		}
	}
	if len(r.Memories) != 4 {
		t.Errorf("memories: %+v", r.Memories)
	}
}

// TestConsolidation: a pass remembers each "remember that" fact once,
// then is done.
func TestConsolidation(t *testing.T) {
	c := client(t)
	conv := llm.User("THE CONVERSATION (since the last pass)\nUSER (2026-12-06 10:00): Remember that staging is on port 5433. Thanks!")
	step := func(state string) llm.ToolCall {
		t.Helper()
		res, err := c.Chat(context.Background(), llm.Request{Role: llm.RoleConsolidate, Tools: consolidate.AllTools(),
			Messages: []llm.Message{llm.System("x"), conv, llm.User(state)}})
		if err != nil || len(res.Message.ToolCalls) != 1 {
			t.Fatalf("step: %v %+v", err, res)
		}
		return res.Message.ToolCalls[0]
	}
	call := step("STORED MEMORIES\n(none stored yet)\n\nTHIS PASS\nSteps used: 0 of 12.")
	var args consolidate.RememberArgs
	if err := json.Unmarshal(call.Arguments, &args); err != nil || call.Name != consolidate.ToolRemember ||
		args.Text != "Staging is on port 5433." || !args.SaidByUser {
		t.Fatalf("first step: %s %s %v", call.Name, call.Arguments, err)
	}
	if call := step("STORED MEMORIES\n- (observation) Staging is on port 5433.\n\nTHIS PASS\nSteps used: 1 of 12."); call.Name != consolidate.ToolDone {
		t.Fatalf("second step: %s", call.Name)
	}
}

// TestSummary: the active task is the latest user message, the user's
// rules are constraints, the earlier requests completed actions, and the
// summary says a demo wrote it.
func TestSummary(t *testing.T) {
	c := client(t)
	transcript := "[USER]\nSet up checkout. Never use yarn.\n\n[ASSISTANT]\nDone.\n\n[USER]\nAdd a coupon field."
	res, err := c.Chat(context.Background(), llm.Request{Role: llm.RoleSummarize,
		Messages: []llm.Message{llm.System("You write handoff summaries"), llm.User("Summarise\n\n" + transcript)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Active task\n\"Add a coupon field.\"", "## Constraints and preferences\n- Never use yarn.",
		"## Completed actions\n1. Answered \"Set up checkout. Never use yarn.\"", "demo model"} {
		if !strings.Contains(res.Message.Content, want) {
			t.Errorf("summary lacks %q:\n%s", want, res.Message.Content)
		}
	}
}
