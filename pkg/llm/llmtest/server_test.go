package llmtest_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

func apiClient(t *testing.T, srv *llmtest.Server) *api.Client {
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(u, http.DefaultClient)
}

func chat(t *testing.T, c *api.Client, model, msg string) (api.ChatResponse, error) {
	t.Helper()
	stream := false
	var out api.ChatResponse
	err := c.Chat(context.Background(), &api.ChatRequest{Model: model, Stream: &stream,
		Messages: []api.Message{{Role: "user", Content: msg}}}, func(r api.ChatResponse) error { out = r; return nil })
	return out, err
}

// The server answers Ollama's own client on every path pkg/llm uses.
func TestSpeaksOllamaAPI(t *testing.T) {
	srv := llmtest.New(t, llmtest.WithEmbedDim(16))
	c := apiClient(t, srv)
	ctx := context.Background()
	if err := c.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Version(ctx); err != nil || v != llmtest.Version {
		t.Fatalf("version %q %v", v, err)
	}
	list, err := c.List(ctx)
	if err != nil || len(list.Models) != 2 || list.Models[0].Name != "llmtest-chat:latest" {
		t.Fatalf("list %+v %v", list, err)
	}
	show, err := c.Show(ctx, &api.ShowRequest{Model: llmtest.EmbedModel})
	if err != nil || show.ModelInfo["llmtest.embedding_length"] != float64(16) {
		t.Fatalf("show %+v %v", show, err)
	}
	emb, err := c.Embed(ctx, &api.EmbedRequest{Model: llmtest.EmbedModel, Input: []string{"a", "b c"}})
	if err != nil || len(emb.Embeddings) != 2 || len(emb.Embeddings[1]) != 16 {
		t.Fatalf("embed %+v %v", emb, err)
	}
	emb, err = c.Embed(ctx, &api.EmbedRequest{Model: llmtest.EmbedModel, Input: "single"})
	if err != nil || len(emb.Embeddings) != 1 {
		t.Fatalf("embed one %+v %v", emb, err)
	}
	srv.Enqueue(llmtest.Text("hello").Tokens(5, 2))
	resp, err := chat(t, c, "any-model", "hi")
	if err != nil || resp.Message.Content != "hello" || !resp.Done || resp.DoneReason != "stop" ||
		resp.PromptEvalCount != 5 || resp.EvalCount != 2 || resp.Message.Role != "assistant" {
		t.Fatalf("chat %+v %v", resp, err)
	}
	stream := false
	if err := c.Pull(ctx, &api.PullRequest{Model: "new:1b", Stream: &stream}, func(p api.ProgressResponse) error {
		if p.Status != "success" {
			t.Errorf("pull status %q", p.Status)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if list, _ := c.List(ctx); len(list.Models) != 3 {
		t.Fatalf("pulled model not listed: %+v", list.Models)
	}
	for path, n := range map[string]int{"/": 1, "/api/version": 1, "/api/tags": 2, "/api/show": 1, "/api/embed": 2, "/api/chat": 1, "/api/pull": 1} {
		if got := srv.Calls(path); got != n {
			t.Errorf("Calls(%s) = %d, want %d", path, got, n)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 9 || reqs[6].Chat == nil || reqs[6].Chat.Messages[0].Content != "hi" || !strings.Contains(string(reqs[6].Body), `"stream":false`) {
		t.Fatalf("recorded %+v", reqs)
	}
}

func TestScriptRules(t *testing.T) {
	srv := llmtest.New(t)
	c := apiClient(t, srv)
	srv.OnChat(llmtest.Contains("alpha"), llmtest.Text("a1"), llmtest.Text("a2"))
	srv.OnChatAlways(llmtest.And(llmtest.Model("special"), llmtest.Not(llmtest.Contains("alpha"))), llmtest.Text("special"))
	srv.Enqueue(llmtest.Text("q1"))
	srv.OnChat(llmtest.LastContains("fn"), llmtest.Func(func(r api.ChatRequest) llmtest.Reply {
		return llmtest.Text("echo " + r.Messages[0].Content)
	}))
	steps := []struct{ model, msg, want string }{
		{"m", "alpha", "a1"},
		{"special", "x", "special"},
		{"m", "alpha", "a2"},
		{"m", "alpha", "q1"}, // alpha rule exhausted: the queue answers
		{"special", "y", "special"},
		{"m", "fn", "echo fn"},
	}
	for _, s := range steps {
		resp, err := chat(t, c, s.model, s.msg)
		if err != nil || resp.Message.Content != s.want {
			t.Fatalf("%s/%s: %q %v, want %q", s.model, s.msg, resp.Message.Content, err, s.want)
		}
	}
	_, err := chat(t, c, "m", "unscripted")
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 500 || !strings.Contains(se.ErrorMessage, "no scripted reply") || srv.Unmatched() != 1 {
		t.Fatalf("unscripted: %v (unmatched %d)", err, srv.Unmatched())
	}
	srv.SetDefault(llmtest.Text("default"))
	if resp, err := chat(t, c, "m", "unscripted"); err != nil || resp.Message.Content != "default" {
		t.Fatalf("default: %q %v", resp.Message.Content, err)
	}
	srv.Reset()
	if len(srv.Requests()) != 0 || srv.Calls("/api/chat") != 0 || srv.Unmatched() != 0 {
		t.Fatal("reset kept records")
	}
}

func TestStrictModelsAndFaults(t *testing.T) {
	srv := llmtest.New(t, llmtest.WithModels("qwen2.5:3b"))
	c := apiClient(t, srv)
	srv.OnChatAlways(nil, llmtest.Text("ok"))
	if _, err := chat(t, c, "qwen2.5:3b", "x"); err != nil {
		t.Fatal(err)
	}
	_, err := chat(t, c, "llama3", "x")
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 || se.ErrorMessage != "model 'llama3' not found" {
		t.Fatalf("missing model: %#v", err)
	}
	_, err = c.Embed(context.Background(), &api.EmbedRequest{Model: "nomic-embed-text", Input: "x"})
	if !errors.As(err, &se) || se.StatusCode != 404 || se.ErrorMessage != `model "nomic-embed-text" not found, try pulling it first` {
		t.Fatalf("missing embed model: %#v", err)
	}
	srv.AddModel("llama3")
	if _, err := chat(t, c, "llama3:latest", "x"); err != nil {
		t.Fatalf("added model: %v", err)
	}
}

func TestFormatCheckedLikeOllama(t *testing.T) {
	srv := llmtest.New(t)
	c := apiClient(t, srv)
	stream := false
	srv.OnChatAlways(nil, llmtest.Example())
	var out api.ChatResponse
	schema := `{"type":"object","properties":{"n":{"type":"integer","minimum":3},"k":{"type":"string","enum":["b","a"]},` +
		`"l":{"type":"array","items":{"type":"string","minLength":2,"maxLength":4},"minItems":2,"maxItems":3}},"required":["n","k","l"]}`
	err := c.Chat(context.Background(), &api.ChatRequest{Model: "m", Stream: &stream, Format: []byte(schema)},
		func(r api.ChatResponse) error { out = r; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if out.Message.Content != `{"k":"b","l":["xx","xx"],"n":3}` {
		t.Fatalf("example %s", out.Message.Content)
	}
	err = c.Chat(context.Background(), &api.ChatRequest{Model: "m", Stream: &stream, Format: []byte(`"yaml"`)},
		func(api.ChatResponse) error { return nil })
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 500 || !strings.Contains(se.ErrorMessage, "invalid format") {
		t.Fatalf("bad format: %v", err)
	}
}

// Example() replies satisfy the schema llm generated for a Go type.
func TestExampleFitsGeneratedSchema(t *testing.T) {
	type out struct {
		Kind  string   `json:"kind" llm:"enum=x|y"`
		Items []string `json:"items" llm:"maxItems=2,minItems=1,maxLength=5,minLength=3"`
		N     int      `json:"n" llm:"minimum=2,maximum=9"`
		F     float64  `json:"f" llm:"minimum=0.5,maximum=1"`
	}
	srv := llmtest.New(t)
	srv.Enqueue(llmtest.Example())
	got, _, err := llm.Structured[out](context.Background(), srv.Client(), llm.Request{Role: llm.RoleSummarize})
	if err != nil || got.Kind != "x" || len(got.Items) != 1 || got.Items[0] != "xxx" || got.N != 2 || got.F != 0.5 {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestLatencyHangAndClose(t *testing.T) {
	srv := llmtest.New(t)
	c := apiClient(t, srv)
	srv.Enqueue(llmtest.Text("slow").After(150 * time.Millisecond))
	start := time.Now()
	if _, err := chat(t, c, "m", "x"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("delayed reply came after %v", d)
	}
	srv.Enqueue(llmtest.Hang())
	done := make(chan error, 1)
	go func() { _, err := chat(t, c, "m", "x"); done <- err }()
	deadline := time.Now().Add(30 * time.Second)
	for srv.Calls("/api/chat") < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	srv.Close() // releases the hanging request
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("hung request succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not release a hanging request")
	}
}

func TestDownUp(t *testing.T) {
	srv := llmtest.New(t)
	c := apiClient(t, srv)
	srv.OnChatAlways(nil, llmtest.Text("ok"))
	srv.Down()
	if _, err := chat(t, c, "m", "x"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("down: %v", err)
	}
	srv.Up()
	if _, err := chat(t, c, "m", "x"); err != nil {
		t.Fatalf("up: %v", err)
	}
	srv.SetUnavailable(true)
	var se api.StatusError
	if _, err := chat(t, c, "m", "x"); !errors.As(err, &se) || se.StatusCode != 503 {
		t.Fatalf("unavailable: %v", err)
	}
}

func TestStartWithoutTest(t *testing.T) {
	srv, err := llmtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.Enqueue(llmtest.Text("ok"))
	resp, err := srv.Client().Chat(context.Background(), llm.Request{Role: llm.RoleExtract, Messages: []llm.Message{llm.User("x")}})
	if err != nil || resp.Message.Content != "ok" {
		t.Fatalf("%+v %v", resp, err)
	}
}

// WithoutRecording keeps no request but still counts them.
func TestWithoutRecording(t *testing.T) {
	srv := llmtest.New(t, llmtest.WithoutRecording())
	srv.OnChatAlways(llmtest.Any(), llmtest.Text("hi"))
	c := apiClient(t, srv)
	for range 3 {
		if out, err := chat(t, c, llmtest.ChatModel, "hello"); err != nil || out.Message.Content != "hi" {
			t.Fatalf("chat: %+v, %v", out, err)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests kept", n)
	}
	if n := srv.Calls("/api/chat"); n != 3 {
		t.Errorf("%d chat calls counted, want 3", n)
	}
}

// The context length /api/show reports, what a chat request's window is,
// and what a real Ollama does with a prompt over it: cut it silently by
// default, refuse it (400) with truncate=false.
func TestContextWindowLikeOllama(t *testing.T) {
	srv := llmtest.New(t, llmtest.WithOutputLimit())
	c := apiClient(t, srv)
	srv.SetContextLength("small", 1000)
	srv.SetContextLength("nometa", 0)
	ctx := context.Background()
	for model, want := range map[string]any{"small": float64(1000), llmtest.ChatModel: float64(llmtest.DefaultContextLength), "nometa": nil} {
		show, err := c.Show(ctx, &api.ShowRequest{Model: model})
		if err != nil || show.ModelInfo["llmtest.context_length"] != want {
			t.Errorf("%s: context length %v %v, want %v", model, show.ModelInfo["llmtest.context_length"], err, want)
		}
	}
	srv.OnChatAlways(nil, llmtest.Text(strings.Repeat("abcd", 100)))
	send := func(model string, prompt string, opts map[string]any, truncate *bool) (api.ChatResponse, error) {
		stream := false
		var out api.ChatResponse
		err := c.Chat(ctx, &api.ChatRequest{Model: model, Stream: &stream, Options: opts, Truncate: truncate,
			Messages: []api.Message{{Role: "user", Content: prompt}}}, func(r api.ChatResponse) error { out = r; return nil })
		return out, err
	}
	no := false
	long := strings.Repeat("x", 20000) // 5,000 tokens
	// No num_ctx: Ollama's default window (4,096), the prompt cut.
	if _, err := send(llmtest.ChatModel, long, nil, nil); err != nil {
		t.Fatal(err)
	}
	// num_ctx above the model's own: held to the model's.
	if _, err := send("small", strings.Repeat("x", 4800), map[string]any{"num_ctx": 8192}, nil); err != nil {
		t.Fatal(err)
	}
	// truncate=false: refused.
	_, err := send(llmtest.ChatModel, long, map[string]any{"num_ctx": 4096}, &no)
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest || !strings.Contains(se.ErrorMessage, "exceeds the context length") {
		t.Fatalf("a prompt over num_ctx with truncate=false: %v", err)
	}
	// Fits: answered; the reply held to num_predict.
	resp, err := send(llmtest.ChatModel, "short", map[string]any{"num_ctx": 8192, "num_predict": 10}, &no)
	if err != nil || resp.DoneReason != "length" || len(resp.Message.Content) != 40 {
		t.Fatalf("reply over num_predict: %q %q %v", resp.DoneReason, resp.Message.Content, err)
	}
	recs := srv.Chats()
	if len(recs) != 4 {
		t.Fatalf("%d chat records", len(recs))
	}
	for i, want := range []struct {
		numCtx, prompt int
		cut            bool
	}{{0, 5004, true}, {8192, 1204, true}, {4096, 5004, true}, {8192, 6, false}} {
		if r := recs[i]; r.NumCtx != want.numCtx || r.PromptTokens != want.prompt || r.Cut != want.cut {
			t.Errorf("request %d: num_ctx %d, prompt %d, cut %v; want %+v", i, r.NumCtx, r.PromptTokens, r.Cut, want)
		}
	}
}
