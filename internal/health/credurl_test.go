package health_test

import (
	"context"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/pkg/llm"
)

// Issue 31: the model check of a client whose Ollama URL holds a password,
// Ollama being down, reports on the unauthenticated /readyz without the
// password (the client's error names its host).
func TestReadyzHidesTheOllamaPassword(t *testing.T) {
	const pw = "0llama-Pa55word"
	cfg := llm.DefaultConfig()
	cfg.Host = "http://engram:" + pw + "@127.0.0.1:1"
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Check(context.Background()); err == nil || !strings.Contains(err.Error(), pw) {
		t.Fatalf("the client's error %v does not name its URL: the test shows nothing", err)
	}
	var checks health.Checks
	checks.Add(health.Check{Name: "model", Run: func(ctx context.Context) error {
		_, err := c.Check(ctx)
		return health.Degraded(err)
	}}, health.Check{Name: "store", Run: func(context.Context) error {
		return &urlError{"dial redis://default:" + pw + "@10.0.0.1:6379: connection refused"}
	}})
	srv, err := health.Listen("127.0.0.1:0", health.Handler(&checks, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	_, body := get(t, srv.URL()+"/readyz")
	if strings.Contains(body, pw) || !strings.Contains(body, "engram:xxxxx@") {
		t.Errorf("/readyz shows the password, or no masked URL:\n%s", body)
	}
}

type urlError struct{ s string }

func (e *urlError) Error() string { return e.s }
