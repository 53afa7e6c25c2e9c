package llm_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

func TestChatErrorClassification(t *testing.T) {
	cases := []struct {
		name  string
		reply llmtest.Reply
		want  error
		class llm.Class
		text  string
	}{
		{"model missing", llmtest.ModelMissing(), llm.ErrModelMissing, llm.ClassTransient, "ollama pull llmtest-chat"},
		{"500", llmtest.ServerError("llama runner process has terminated"), llm.ErrUnavailable, llm.ClassTransient, "HTTP 500"},
		{"503 busy", llmtest.Busy(), llm.ErrUnavailable, llm.ClassTransient, "server busy"},
		{"invalid schema 500", llmtest.InvalidSchema(), llm.ErrInvalidRequest, llm.ClassPermanent, "invalid JSON schema in format"},
		{"invalid format 500", llmtest.ServerError(`invalid format: "X"; expected "json" or a valid JSON Schema object`), llm.ErrInvalidRequest, llm.ClassPermanent, "invalid format"},
		{"option type 500", llmtest.ServerError(`option "temperature" must be of type float32`), llm.ErrInvalidRequest, llm.ClassPermanent, "must be of type"},
		{"400", llmtest.Status(http.StatusBadRequest, `registry.ollama.ai/library/x does not support tools`), llm.ErrInvalidRequest, llm.ClassPermanent, "does not support tools"},
		{"429", llmtest.Status(http.StatusTooManyRequests, "slow down"), llm.ErrUnavailable, llm.ClassTransient, "429"},
		{"malformed body", llmtest.MalformedBody(), llm.ErrUnavailable, llm.ClassTransient, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Enqueue(c.reply)
			_, err := srv.Client().Chat(ctx(t), req("q"))
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			for _, other := range []error{llm.ErrModelMissing, llm.ErrUnavailable, llm.ErrInvalidRequest, llm.ErrMisbehaved, llm.ErrBudgetExhausted} {
				if other != c.want && errors.Is(err, other) {
					t.Errorf("err %v also matches %v", err, other)
				}
			}
			if got := llm.Classify(err); got != c.class {
				t.Errorf("Classify = %v, want %v", got, c.class)
			}
			if !strings.Contains(err.Error(), c.text) {
				t.Errorf("err %q does not contain %q", err, c.text)
			}
		})
	}
}

// The scripted server rejects a wrongly typed option the way Ollama does: a
// 500 whose message says `option "..." must be of type` (the classification
// table above checks that such a 500 is permanent).
func TestServerRejectsBadOptionsLikeOllama(t *testing.T) {
	srv := llmtest.New(t)
	body := `{"model":"llmtest-chat","messages":[],"stream":false,"options":{"temperature":"hot"}}`
	resp, err := http.Post(srv.URL()+"/api/chat", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || !strings.Contains(string(b), `option \"temperature\" must be of type float32`) {
		t.Fatalf("status %d body %s", resp.StatusCode, b)
	}
}

func TestModelMissingNamesModelOnEveryPath(t *testing.T) {
	srv := llmtest.New(t)
	srv.RemoveModel(llmtest.ChatModel)
	srv.RemoveModel(llmtest.EmbedModel)
	c := srv.Client()
	_, err := c.Chat(ctx(t), req("q"))
	if !errors.Is(err, llm.ErrModelMissing) || !strings.Contains(err.Error(), "model 'llmtest-chat' not found") ||
		!strings.Contains(err.Error(), "`ollama pull llmtest-chat`") {
		t.Fatalf("chat: %v", err)
	}
	_, err = c.Embedder().Embed(ctx(t), []string{"x"})
	if !errors.Is(err, llm.ErrModelMissing) || !strings.Contains(err.Error(), `model "llmtest-embed" not found, try pulling it first`) ||
		!strings.Contains(err.Error(), "`ollama pull llmtest-embed`") {
		t.Fatalf("embed: %v", err)
	}
	rd, err := c.Check(ctx(t))
	if !errors.Is(err, llm.ErrModelMissing) || !strings.Contains(err.Error(), "ollama pull llmtest-chat") {
		t.Fatalf("check: %v", err)
	}
	if rd.Version != llmtest.Version || len(rd.Models) != 4 || rd.Models[0].Present {
		t.Fatalf("readiness %+v", rd)
	}
	if srv.Calls("/api/pull") != 0 {
		t.Fatal("pulled without AutoPull")
	}
}

func TestAutoPull(t *testing.T) {
	srv := llmtest.New(t)
	srv.RemoveModel(llmtest.ChatModel)
	cfg := srv.Config()
	cfg.AutoPull = true
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(llmtest.Text("hello"))
	resp, err := c.Chat(ctx(t), req("q"))
	if err != nil || resp.Message.Content != "hello" {
		t.Fatalf("after auto-pull: %+v, %v", resp, err)
	}
	// The model's context length (/api/show) finds it missing first.
	if srv.Calls("/api/pull") != 1 || srv.Calls("/api/chat") != 1 || srv.Calls("/api/show") != 2 {
		t.Fatalf("pull %d chat %d show %d, want 1, 1 and 2", srv.Calls("/api/pull"), srv.Calls("/api/chat"), srv.Calls("/api/show"))
	}
	var pulled string
	for _, r := range srv.Requests() {
		if r.Pull != nil {
			pulled = r.Pull.Model
			if r.Pull.Stream == nil || *r.Pull.Stream {
				t.Error("pull was streamed")
			}
		}
	}
	if pulled != llmtest.ChatModel {
		t.Fatalf("pulled %q", pulled)
	}

	// A failed pull leaves the model missing, with the pull error attached.
	srv.RemoveModel(llmtest.ChatModel)
	srv.OnPull(llmtest.ServerError("pull model manifest: file does not exist"))
	_, err = c.Chat(ctx(t), req("q"))
	if !errors.Is(err, llm.ErrModelMissing) || !strings.Contains(err.Error(), "auto-pull failed") {
		t.Fatalf("failed pull: %v", err)
	}
}

func TestTimeoutIsUnavailableButCallerCancelIsNot(t *testing.T) {
	srv := llmtest.New(t)
	srv.OnChatAlways(nil, llmtest.Hang())
	c := srv.Client()
	r := req("q")
	r.Timeout = 200 * time.Millisecond
	_, err := c.Chat(ctx(t), r)
	if !errors.Is(err, llm.ErrUnavailable) || llm.Classify(err) != llm.ClassTransient {
		t.Fatalf("per-call timeout: %v", err)
	}

	cctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Chat(cctx, req("q"))
		done <- err
	}()
	waitFor(t, func() bool { return srv.Calls("/api/chat") == 2 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || errors.Is(err, llm.ErrUnavailable) {
			t.Fatalf("caller cancel: %v", err)
		}
		if llm.Classify(err) != llm.ClassCanceled {
			t.Fatalf("Classify = %v", llm.Classify(err))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Chat did not return after cancel")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An outage (connection refused, then 503) is ErrUnavailable, and the same
// client works again when Ollama is back.
func TestOutageAndRecovery(t *testing.T) {
	srv := llmtest.New(t)
	srv.OnChatAlways(nil, llmtest.Text("up"))
	c := srv.Client()
	emb := c.Embedder()

	srv.Down()
	_, err := c.Chat(ctx(t), req("q"))
	if !errors.Is(err, llm.ErrUnavailable) || !strings.Contains(err.Error(), srv.URL()) {
		t.Fatalf("down chat: %v", err)
	}
	if _, err := emb.Embed(ctx(t), []string{"x"}); !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("down embed: %v", err)
	}
	if _, err := c.Check(ctx(t)); !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("down check: %v", err)
	}

	srv.Up()
	srv.SetUnavailable(true)
	if _, err := c.Chat(ctx(t), req("q")); !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("503: %v", err)
	}
	srv.SetUnavailable(false)
	resp, err := c.Chat(ctx(t), req("q"))
	if err != nil || resp.Message.Content != "up" {
		t.Fatalf("after recovery: %+v %v", resp, err)
	}
	if _, err := c.Check(ctx(t)); err != nil {
		t.Fatalf("check after recovery: %v", err)
	}
}

func TestChatRejectsBadRequestsLocally(t *testing.T) {
	srv := llmtest.New(t)
	c := srv.Client()
	r := req("q")
	r.Role = llm.RoleEmbed
	if _, err := c.Chat(ctx(t), r); !errors.Is(err, llm.ErrInvalidRequest) {
		t.Fatalf("embed role: %v", err)
	}
	r = req("q")
	r.Format = &llm.Schema{Type: "object", Properties: []llm.Property{{Name: "s", Schema: &llm.Schema{Type: "string"}}}}
	if _, err := c.Chat(ctx(t), r); !errors.Is(err, llm.ErrInvalidRequest) || !strings.Contains(err.Error(), "maxLength") {
		t.Fatalf("unbounded format: %v", err)
	}
	if srv.Calls("/api/chat") != 0 {
		t.Fatal("invalid requests reached the server")
	}
}

func TestClassify(t *testing.T) {
	be := &llm.BudgetError{Project: "p", Until: time.Now()}
	cases := map[error]llm.Class{
		nil:                      llm.ClassNone,
		llm.ErrInvalidRequest:    llm.ClassPermanent,
		llm.ErrInvalidArguments:  llm.ClassPermanent,
		llm.ErrUnavailable:       llm.ClassTransient,
		llm.ErrMisbehaved:        llm.ClassTransient,
		llm.ErrModelMissing:      llm.ClassTransient,
		be:                       llm.ClassTransient,
		context.Canceled:         llm.ClassCanceled,
		errors.New("unexpected"): llm.ClassTransient,
	}
	for err, want := range cases {
		if got := llm.Classify(err); got != want {
			t.Errorf("Classify(%v) = %v, want %v", err, got, want)
		}
	}
}

func TestMaxPredictRefusesSchemaThatCannotFit(t *testing.T) {
	srv := llmtest.New(t)
	cfg := srv.Config()
	cfg.MaxPredict = 50
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = llm.Structured[fact](ctx(t), c, req("q"))
	if !errors.Is(err, llm.ErrInvalidRequest) || !strings.Contains(err.Error(), "MaxPredict is 50") {
		t.Fatalf("err = %v", err)
	}
	// Plain calls are capped instead.
	srv.Enqueue(llmtest.Text("ok"))
	r := req("q")
	r.MaxTokens = 500
	if _, err := c.Chat(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	if got := srv.LastChat().Options["num_predict"]; got != float64(50) {
		t.Fatalf("num_predict %v, want capped 50", got)
	}
}

func TestWaitReady(t *testing.T) {
	srv := llmtest.New(t)
	srv.RemoveModel(llmtest.ChatModel)
	c := srv.Client()
	reports := make(chan error, 100)
	done := make(chan error, 1)
	go func() {
		_, err := c.WaitReady(ctx(t), 10*time.Millisecond, func(_ llm.Readiness, err error) {
			select {
			case reports <- err:
			default:
			}
		})
		done <- err
	}()
	select {
	case err := <-reports:
		if !errors.Is(err, llm.ErrModelMissing) || !strings.Contains(err.Error(), "ollama pull llmtest-chat") {
			t.Fatalf("report %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no report while the model is missing")
	}
	srv.AddModel(llmtest.ChatModel)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitReady did not return once the model was there")
	}

	cctx, cancel := context.WithCancel(context.Background())
	srv.Down()
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := c.WaitReady(cctx, 5*time.Millisecond, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled wait: %v", err)
	}
}
