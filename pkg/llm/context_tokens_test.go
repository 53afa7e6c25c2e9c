package llm_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

// Every chat sends the role's window as num_ctx, and truncate=false and
// shift=false, so Ollama never drops the start of a prompt; ContextTokens
// only lowers num_ctx.
func TestEveryCallSendsTheRoleWindow(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetContextLength(llmtest.ChatModel, 16384)
	c := srv.Client()
	srv.OnChatAlways(nil, llmtest.Text("ok"))
	if _, err := c.Chat(ctx(t), req("q")); err != nil {
		t.Fatal(err)
	}
	got := srv.LastChat()
	if got.Options["num_ctx"] != float64(16384) || got.Truncate == nil || *got.Truncate || got.Shift == nil || *got.Shift {
		t.Fatalf("num_ctx %v, truncate %v, shift %v: want 16384, false, false", got.Options["num_ctx"], got.Truncate, got.Shift)
	}
	r := req("q")
	r.ContextTokens = 4096
	if _, err := c.Chat(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	if got := srv.LastChat().Options["num_ctx"]; got != float64(4096) {
		t.Fatalf("num_ctx %v, want ContextTokens 4096", got)
	}
	r.ContextTokens = 1 << 20
	if _, err := c.Chat(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	if got := srv.LastChat().Options["num_ctx"]; got != float64(16384) {
		t.Fatalf("num_ctx %v, want the window 16384 (ContextTokens never raises it)", got)
	}
	if n := srv.Calls("/api/show"); n != 1 {
		t.Fatalf("%d /api/show calls for three chats, want 1 (cached)", n)
	}
}

// The window: the setting, else the model's metadata (capped), else the
// default; a setting above the model's own is lowered to it.
func TestContextLength(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetContextLength("small", 2048)
	srv.SetContextLength("huge", 131072)
	srv.SetContextLength("nometa", 0)
	for _, tc := range []struct {
		model   string
		setting int
		want    int
	}{
		{llmtest.ChatModel, 0, llmtest.DefaultContextLength},
		{"small", 0, 2048},
		{"small", 8192, 2048},
		{"huge", 0, llm.MaxAutoContextLength},
		{"huge", 65536, 65536},
		{"nometa", 0, llm.DefaultContextLength},
		{"nometa", 1024, 1024},
	} {
		cfg := srv.Config()
		cfg.Summarize.Name, cfg.Summarize.ContextLength = tc.model, tc.setting
		c, err := llm.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.ContextLength(ctx(t), llm.RoleSummarize)
		if err != nil || got != tc.want {
			t.Errorf("%s with setting %d: %d %v, want %d", tc.model, tc.setting, got, err, tc.want)
		}
		own, err := c.ModelContextLength(ctx(t), tc.model)
		if want := map[string]int{"small": 2048, "huge": 131072}[tc.model]; tc.model != llmtest.ChatModel && (err != nil || own != want) {
			t.Errorf("%s: model context length %d %v, want %d", tc.model, own, err, want)
		}
	}
	cfg := srv.Config()
	cfg.Summarize.ContextLength = 100
	if _, err := llm.New(cfg); err == nil || !strings.Contains(err.Error(), "context length 100") {
		t.Fatalf("a 100-token window accepted: %v", err)
	}
}

func TestContextLengthErrors(t *testing.T) {
	srv := llmtest.New(t)
	c := srv.Client()
	srv.RemoveModel(llmtest.ChatModel)
	if _, err := c.ContextLength(ctx(t), llm.RoleSummarize); !errors.Is(err, llm.ErrModelMissing) {
		t.Fatalf("missing model: %v", err)
	}
	srv.AddModel(llmtest.ChatModel)
	srv.Down()
	if _, err := c.ContextLength(ctx(t), llm.RoleSummarize); !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("Ollama down: %v", err)
	}
	srv.Up()
	if n, err := c.ContextLength(ctx(t), llm.RoleSummarize); err != nil || n != llmtest.DefaultContextLength {
		t.Fatalf("after the outage: %d %v", n, err)
	}
	// The metadata is cached for 10 minutes, then read again.
	now := time.Now()
	c2 := srv.Client(llm.WithClock(func() time.Time { return now }))
	shows := srv.Calls("/api/show")
	for range 3 {
		if _, err := c2.ContextLength(ctx(t), llm.RoleSummarize); err != nil {
			t.Fatal(err)
		}
	}
	srv.SetContextLength(llmtest.ChatModel, 4096)
	if n, _ := c2.ContextLength(ctx(t), llm.RoleSummarize); n != llmtest.DefaultContextLength || srv.Calls("/api/show") != shows+1 {
		t.Fatalf("cached: %d after %d shows", n, srv.Calls("/api/show")-shows)
	}
	now = now.Add(11 * time.Minute)
	if n, _ := c2.ContextLength(ctx(t), llm.RoleSummarize); n != 4096 {
		t.Fatalf("after the cache expired: %d, want 4096", n)
	}
}

// A prompt over the window is refused by Ollama (truncate=false) and comes
// back as ErrContextExceeded, never cut silently.
func TestPromptOverTheWindowIsRefused(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetContextLength(llmtest.ChatModel, 1024)
	c := srv.Client()
	srv.OnChatAlways(nil, llmtest.Text("ok"))
	_, err := c.Chat(ctx(t), req(strings.Repeat("word ", 2000)))
	if !errors.Is(err, llm.ErrContextExceeded) || !errors.Is(err, llm.ErrInvalidRequest) || llm.Classify(err) != llm.ClassPermanent {
		t.Fatalf("a 10,000-character prompt in a 1,024-token window: %v", err)
	}
	recs := srv.Chats()
	if len(recs) != 1 || !recs[0].Cut || recs[0].NumCtx != 1024 || recs[0].PromptTokens <= 1024 {
		t.Fatalf("recorded %+v", recs)
	}
	if _, err := c.Chat(ctx(t), req(strings.Repeat("word ", 500))); err != nil {
		t.Fatalf("a prompt that fits: %v", err)
	}
}

func TestCutOff(t *testing.T) {
	srv := llmtest.New(t)
	c := srv.Client()
	srv.Enqueue(llmtest.Truncated("## Active task\nThe user"), llmtest.Text("done"))
	resp, err := c.Chat(ctx(t), req("q"))
	if err != nil || !resp.CutOff() || resp.DoneReason != llm.DoneLength {
		t.Fatalf("cut-off reply: %+v %v", resp, err)
	}
	resp, err = c.Chat(ctx(t), req("q"))
	if err != nil || resp.CutOff() {
		t.Fatalf("whole reply: %+v %v", resp, err)
	}
}

// RequestTokens bounds what the scripted server (like a tokenizer) counts,
// in English, code and CJK text.
func TestRequestTokensIsAnUpperBound(t *testing.T) {
	for _, text := range []string{
		strings.Repeat("The deploy fails at the migration step. ", 100),
		strings.Repeat(`func main() { fmt.Println("x", y[3]) } // {}[]()`, 100),
		strings.Repeat("用户喜欢在周末去山里徒步。", 100),
		strings.Repeat("Пользователь любит ходить в горы. ", 100),
	} {
		r := llm.Request{Messages: []llm.Message{llm.System("sys"), llm.User(text)}}
		api := apiRequest(r)
		if got, srvCount := llm.RequestTokens(r), llmtest.PromptTokens(api); got < srvCount {
			t.Errorf("RequestTokens %d under the server's count %d for %.30q", got, srvCount, text)
		}
		if got, est := llm.RequestTokens(r), llm.EstimateTokens(text); got < est {
			t.Errorf("RequestTokens %d under the characters / 4 estimate %d", got, est)
		}
	}
}

func apiRequest(r llm.Request) api.ChatRequest {
	var out api.ChatRequest
	for _, m := range r.Messages {
		out.Messages = append(out.Messages, api.Message{Role: m.Author, Content: m.Content})
	}
	return out
}
