package llm_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func TestDailyBudget(t *testing.T) {
	srv := llmtest.New(t)
	srv.OnChatAlways(nil, llmtest.Text("ok").Tokens(60, 40))
	clock := &fakeClock{now: time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)}
	cfg := srv.Config()
	cfg.DailyTokenBudget = 250
	cfg.ProjectBudgets = map[string]int64{"big": 0}
	c, err := llm.New(cfg, llm.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	r := req("q") // project p1
	for i := 0; i < 3; i++ {
		if _, err := c.Chat(ctx(t), r); err != nil {
			t.Fatalf("call %d within budget: %v", i, err)
		}
	}
	// 300 tokens spent >= 250: the next call is refused without reaching Ollama.
	_, err = c.Chat(ctx(t), r)
	var be *llm.BudgetError
	if !errors.Is(err, llm.ErrBudgetExhausted) || !errors.As(err, &be) {
		t.Fatalf("err = %v, want a BudgetError", err)
	}
	if want := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC); !be.Until.Equal(want) || be.Spent != 300 || be.Limit != 250 || be.Project != "p1" {
		t.Fatalf("budget error %+v, want until %v", be, want)
	}
	if !strings.Contains(err.Error(), "2026-03-02T00:00:00Z") {
		t.Errorf("message %q does not say until when", err)
	}
	if srv.Calls("/api/chat") != 3 {
		t.Fatalf("%d calls reached the server", srv.Calls("/api/chat"))
	}
	// Other projects are not affected; an override of 0 is unlimited.
	r2 := req("q")
	r2.Project = "p2"
	if _, err := c.Chat(ctx(t), r2); err != nil {
		t.Fatalf("other project: %v", err)
	}
	r3 := req("q")
	r3.Project = "big"
	for i := 0; i < 4; i++ {
		if _, err := c.Chat(ctx(t), r3); err != nil {
			t.Fatalf("unlimited project: %v", err)
		}
	}
	// Next UTC day the budget is fresh.
	clock.Set(time.Date(2026, 3, 2, 0, 0, 1, 0, time.UTC))
	if _, err := c.Chat(ctx(t), r); err != nil {
		t.Fatalf("next day: %v", err)
	}
}

func TestBudgetOffByDefault(t *testing.T) {
	srv := llmtest.New(t)
	srv.OnChatAlways(nil, llmtest.Text("ok").Tokens(1_000_000, 1_000_000))
	c := srv.Client()
	for i := 0; i < 3; i++ {
		if _, err := c.Chat(ctx(t), req("q")); err != nil {
			t.Fatal(err)
		}
	}
}

func TestObserverAndTokenEstimates(t *testing.T) {
	srv := llmtest.New(t)
	var mu sync.Mutex
	var seen []llm.CallInfo
	obs := llm.ObserverFunc(func(ci llm.CallInfo) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, ci)
	})
	c := srv.Client(llm.WithObserver(obs))
	srv.Enqueue(llmtest.Text("four").Tokens(7, 3), llmtest.Text("12345678").NoTokens(), llmtest.ServerError("boom"))

	resp, err := c.Chat(ctx(t), req("q"))
	if err != nil || resp.PromptTokens != 7 || resp.CompletionTokens != 3 || resp.Estimated {
		t.Fatalf("reported counts: %+v %v", resp, err)
	}
	r := req(strings.Repeat("a", 40))
	resp, err = c.Chat(ctx(t), r)
	if err != nil || !resp.Estimated || resp.CompletionTokens != 2 || resp.PromptTokens != llm.EstimateTokens(strings.Repeat("a", 40))+4 {
		t.Fatalf("estimated counts: %+v %v", resp, err)
	}
	_, err = c.Chat(ctx(t), req("q"))
	if !errors.Is(err, llm.ErrUnavailable) {
		t.Fatal(err)
	}
	if _, err := c.Embedder().Embed(ctx(t), []string{"abc", "def"}); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4 {
		t.Fatalf("%d observations, want 4", len(seen))
	}
	first := seen[0]
	if first.Op != "chat" || first.Role != llm.RoleExtract || first.Project != "p1" || first.Model != llmtest.ChatModel ||
		first.PromptTokens != 7 || first.CompletionTokens != 3 || first.Err != nil || first.Class != llm.ClassNone || first.Latency <= 0 {
		t.Errorf("first observation %+v", first)
	}
	if !seen[1].Estimated {
		t.Errorf("second observation not marked estimated: %+v", seen[1])
	}
	if seen[2].Err == nil || seen[2].Class != llm.ClassTransient {
		t.Errorf("failed call observation %+v", seen[2])
	}
	if seen[3].Op != "embed" || seen[3].Role != llm.RoleEmbed || seen[3].PromptTokens == 0 {
		t.Errorf("embed observation %+v", seen[3])
	}
}

func TestMemoryLedger(t *testing.T) {
	l := llm.NewMemoryLedger()
	d1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d2 := d1.Add(24 * time.Hour)
	_ = l.Add(ctx(t), "p", d1, 5)
	_ = l.Add(ctx(t), "p", d1, 6)
	if n, _ := l.Spent(ctx(t), "p", d1); n != 11 {
		t.Fatalf("spent %d", n)
	}
	_ = l.Add(ctx(t), "p", d2, 1)
	if n, _ := l.Spent(ctx(t), "p", d2); n != 1 {
		t.Fatalf("new day spent %d", n)
	}
	if n, _ := l.Spent(ctx(t), "p", d1); n != 0 {
		t.Fatalf("old day still counted: %d", n)
	}
}

func TestConfigValidateListsEveryProblem(t *testing.T) {
	if err := llm.DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	cfg := llm.DefaultConfig()
	cfg.Host = "ftp://x"
	cfg.Extract.Name = ""
	cfg.Summarize.Timeout = 0
	cfg.Embed = llm.ModelConfig{Name: "nomic-embed-text"}
	cfg.EmbedBatch = 0
	cfg.EmbedDim = -1
	cfg.AutoPull, cfg.PullTimeout = true, 0
	cfg.DailyTokenBudget = -5
	cfg.ProjectBudgets = map[string]int64{"p": -1}
	cfg.MaxPredict = -1
	err := cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"scheme must be http or https", "extract model: name is empty", "summarize model: timeout must be positive",
		"embed model: timeout must be positive", "embed batch", "embed dim", "pull timeout", "daily token budget", `project "p" budget`, "max predict"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %q\nmissing %q", err, want)
		}
	}
	if _, err := llm.New(cfg); err == nil {
		t.Error("New accepted an invalid config")
	}
	bad := llm.DefaultConfig()
	bad.Host = "http://"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "no host name") {
		t.Errorf("empty host: %v", err)
	}
}

func TestHostFromEnvironment(t *testing.T) {
	srv := llmtest.New(t)
	t.Setenv("OLLAMA_HOST", srv.URL())
	cfg := srv.Config()
	cfg.Host = ""
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.Host() != srv.URL() {
		t.Fatalf("host %q, want %q from OLLAMA_HOST", c.Host(), srv.URL())
	}
	srv.Enqueue(llmtest.Text("env"))
	if resp, err := c.Chat(ctx(t), req("q")); err != nil || resp.Message.Content != "env" {
		t.Fatalf("%+v %v", resp, err)
	}
}

func TestKeepAliveAndModelsPerRole(t *testing.T) {
	srv := llmtest.New(t)
	srv.OnChatAlways(nil, llmtest.Text("ok"))
	cfg := srv.Config()
	cfg.Summarize.Name = "summarizer:7b"
	cfg.Summarize.KeepAlive = -1
	cfg.Consolidate.KeepAlive = 0
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []llm.Role{llm.RoleExtract, llm.RoleSummarize, llm.RoleConsolidate} {
		r := req("q")
		r.Role = role
		if _, err := c.Chat(ctx(t), r); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.ChatRequests()
	if reqs[0].Model != llmtest.ChatModel || reqs[0].KeepAlive == nil || reqs[0].KeepAlive.Duration != 10*time.Minute {
		t.Errorf("extract: model %q keep-alive %v", reqs[0].Model, reqs[0].KeepAlive)
	}
	if reqs[1].Model != "summarizer:7b" || reqs[1].KeepAlive == nil || reqs[1].KeepAlive.Duration >= 0 && reqs[1].KeepAlive.Duration < 1000*time.Hour {
		t.Errorf("summarize: model %q keep-alive %v (want forever)", reqs[1].Model, reqs[1].KeepAlive)
	}
	if reqs[2].KeepAlive != nil {
		t.Errorf("consolidate keep-alive %v, want Ollama's default (absent)", reqs[2].KeepAlive)
	}
	if !strings.Contains(string(srv.Chats()[1].Body), `"keep_alive":-1`) {
		t.Errorf("forever keep-alive body %s", srv.Chats()[1].Body)
	}
}

type failingLedger struct{}

func (failingLedger) Spent(context.Context, string, time.Time) (int64, error) {
	return 0, errors.New("redis down")
}

func (failingLedger) Add(context.Context, string, time.Time, int64) error { return nil }

// Two replicas sharing a ledger share the budget; a failing ledger makes the
// call transiently unavailable rather than unbudgeted.
func TestSharedAndFailingLedger(t *testing.T) {
	srv := llmtest.New(t)
	srv.OnChatAlways(nil, llmtest.Text("ok").Tokens(50, 50))
	cfg := srv.Config()
	cfg.DailyTokenBudget = 150
	shared := llm.NewMemoryLedger()
	var counted int
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		counted++
		return http.DefaultTransport.RoundTrip(r)
	})}
	a, _ := llm.New(cfg, llm.WithLedger(shared), llm.WithHTTPClient(hc))
	b, _ := llm.New(cfg, llm.WithLedger(shared))
	if _, err := a.Chat(ctx(t), req("q")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Chat(ctx(t), req("q")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Chat(ctx(t), req("q")); !errors.Is(err, llm.ErrBudgetExhausted) {
		t.Fatalf("replica a after 200 shared tokens: %v", err)
	}
	if counted != 2 {
		t.Fatalf("custom HTTP client carried %d requests, want 2 (the model's context length, one chat)", counted)
	}
	c, _ := llm.New(cfg, llm.WithLedger(failingLedger{}))
	if _, err := c.Chat(ctx(t), req("q")); !errors.Is(err, llm.ErrUnavailable) || !strings.Contains(err.Error(), "redis down") {
		t.Fatalf("failing ledger: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
