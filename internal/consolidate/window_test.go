package consolidate_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

const windowHeader = "THE CONVERSATION (since the last pass)"

// windowLines are the transcript lines of a chat request (its second
// message, without the header).
func windowLines(t testing.TB, req api.ChatRequest) []string {
	t.Helper()
	c := req.Messages[1].Content
	if !strings.HasPrefix(c, windowHeader) {
		t.Fatalf("the second message is not the transcript:\n%.200s", c)
	}
	_, body, _ := strings.Cut(c, "\n")
	if body == "" {
		return nil
	}
	return strings.Split(body, "\n")
}

// firstSteps are the chat requests that began a pass (step 1 of the
// ledger), in order.
func firstSteps(reqs []api.ChatRequest) []api.ChatRequest {
	var out []api.ChatRequest
	for _, r := range reqs {
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "Steps used: 0 of ") {
			out = append(out, r)
		}
	}
	return out
}

// TestWindowLimits: a pass reads the OLDEST messages after the cursor, at
// most 20, each cut to 4,000 characters, 40,000 in all, and as many as fit
// the context; the rest waits for the next pass, which reads on from there.
func TestWindowLimits(t *testing.T) {
	cfg := consolidate.Defaults()
	if cfg.WindowMessages != 20 || cfg.MessageChars != 4000 || cfg.WindowChars != 40000 {
		t.Fatalf("defaults %d messages, %d chars each, %d in all", cfg.WindowMessages, cfg.MessageChars, cfg.WindowChars)
	}

	t.Run("20 messages, oldest first, then the rest", func(t *testing.T) {
		f := newFixture(t, sqliteStore(t))
		for i := 1; i <= 13; i++ { // 26 messages
			f.say(fmt.Sprintf("Q%02d question", i), fmt.Sprintf("A%02d answer", i))
		}
		f.run() // the fallback reply: done at once, pass after pass
		passes := firstSteps(f.srv.ChatRequests())
		if len(passes) != 2 {
			t.Fatalf("%d passes, want 2", len(passes))
		}
		first, second := windowLines(t, passes[0]), windowLines(t, passes[1])
		if len(first) != 20 || !strings.HasSuffix(first[0], "): Q01 question") || !strings.HasSuffix(first[19], "): A10 answer") {
			t.Fatalf("first window (%d lines): %q .. %q", len(first), first[0], first[len(first)-1])
		}
		if !strings.Contains(passes[0].Messages[1].Content, "the messages after these come in the next pass") {
			t.Error("the first window does not say that more messages follow")
		}
		if len(second) != 6 || !strings.HasSuffix(second[0], "): Q11 question") || !strings.HasSuffix(second[5], "): A13 answer") {
			t.Fatalf("second window: %q", second)
		}
		if strings.Contains(passes[1].Messages[1].Content, "come in the next pass") {
			t.Error("the last window says more messages follow")
		}
		if f.cursor() != 26 {
			t.Fatalf("cursor %d, want 26", f.cursor())
		}
	})

	long := func(f *fixture) {
		for i := 1; i <= 12; i++ { // 12 messages of 5,000 characters
			f.say(fmt.Sprintf("M%02d ", i)+strings.Repeat("word ", 998)+fmt.Sprintf("END%02d", i), "")
		}
	}
	t.Run("4,000 characters each, 40,000 in all", func(t *testing.T) {
		f := newFixtureWindow(t, 32768) // room for 40,000 characters: the character bound decides
		long(f)
		f.run()
		passes := firstSteps(f.srv.ChatRequests())
		lines := windowLines(t, passes[0])
		total := 0
		for _, l := range lines {
			content := l[strings.Index(l, "): ")+3:]
			if n := utf8.RuneCountInString(content); n != 4000 || !strings.HasSuffix(content, "…") || strings.Contains(content, "END") {
				t.Errorf("a message of %d characters, not cut to 4,000: %.40s…%s", n, content, content[max(0, len(content)-20):])
			}
			total += utf8.RuneCountInString(l) + 1
		}
		// Each line is ~4,025 characters with its prefix: 9 fit in 40,000.
		if total > 40000 || len(lines) != 9 {
			t.Fatalf("%d lines, %d characters", len(lines), total)
		}
		if !strings.Contains(lines[0], "M01 ") || !strings.Contains(lines[8], "M09 ") {
			t.Errorf("kept %.30s .. %.30s: want M01..M09 (the oldest first)", lines[0], lines[8])
		}
		if len(passes) != 2 || len(windowLines(t, passes[1])) != 3 {
			t.Fatalf("%d passes; the second should read M10..M12", len(passes))
		}
	})

	t.Run("the context bounds the window", func(t *testing.T) {
		f := newFixtureWindow(t, 8192)
		long(f)
		f.run()
		budget := consolidate.Defaults().BudgetFor(8192)
		passes := firstSteps(f.srv.ChatRequests())
		seen := 0
		for i, p := range passes {
			lines := windowLines(t, p)
			tokens := 0
			for _, l := range lines {
				tokens += consolidate.EstimateTokens(l) + 1
			}
			if tokens > budget.Transcript {
				t.Errorf("pass %d: a window of %d tokens, more than the %d the context leaves", i, tokens, budget.Transcript)
			}
			// Another message would not have fitted.
			if i < len(passes)-1 && tokens+consolidate.EstimateTokens(lines[0])+1 <= budget.Transcript {
				t.Errorf("pass %d: a window of %d tokens, room for another message left (%d)", i, tokens, budget.Transcript)
			}
			seen += len(lines)
		}
		if seen != 12 {
			t.Fatalf("%d messages read in %d passes, want 12", seen, len(passes))
		}
		assertWithinContext(t, f.srv)
	})
}

// requestTokens estimates a recorded request as the consolidator plans it
// (llm.RequestTokens): each message's content and framing, and the tools
// it offered.
func requestTokens(t testing.TB, req api.ChatRequest) int {
	t.Helper()
	var r llm.Request
	for _, m := range req.Messages {
		r.Messages = append(r.Messages, llm.Message{Author: m.Role, Content: m.Content})
	}
	for _, tool := range req.Tools {
		found := false
		for _, s := range consolidate.AllTools() {
			if s.Name == tool.Function.Name {
				r.Tools, found = append(r.Tools, s), true
			}
		}
		if !found {
			t.Fatalf("a tool %q the consolidator does not have", tool.Function.Name)
		}
	}
	return llm.RequestTokens(r)
}

// assertWithinContext: every request sends num_ctx and num_predict, its
// prompt plus the reply's room fits num_ctx as the consolidator estimates
// (llm.RequestTokens), and the scripted server, counting as Ollama would,
// found none over its window.
func assertWithinContext(t testing.TB, srv *llmtest.Server) {
	t.Helper()
	reqs := srv.ChatRequests()
	if len(reqs) == 0 {
		t.Fatal("no request")
	}
	for i, r := range reqs {
		ctx, ok1 := num(r.Options["num_ctx"])
		predict, ok2 := num(r.Options["num_predict"])
		if !ok1 || !ok2 || ctx <= 0 || predict <= 0 {
			t.Fatalf("request %d: num_ctx %v, num_predict %v", i, r.Options["num_ctx"], r.Options["num_predict"])
		}
		if n := requestTokens(t, r); n+predict > ctx {
			t.Fatalf("request %d: %d prompt tokens + %d to reply > num_ctx %d", i, n, predict, ctx)
		}
	}
	for _, r := range srv.Requests() {
		if r.Chat != nil && r.Cut {
			t.Fatalf("the server counted %d prompt tokens over num_ctx %d", r.PromptTokens, r.NumCtx)
		}
	}
}

func num(v any) (int, bool) {
	switch x := v.(type) {
	case float64:
		return int(x), true
	case int:
		return x, true
	case json.Number:
		n, err := x.Int64()
		return int(n), err == nil
	}
	return 0, false
}

var msgMark = regexp.MustCompile(`\bM(\d{4,5})\b`)
