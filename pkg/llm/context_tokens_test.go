package llm_test

import (
	"testing"

	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

func TestContextTokensIsNumCtx(t *testing.T) {
	srv := llmtest.New(t)
	c := srv.Client()
	srv.Enqueue(llmtest.Text("ok"), llmtest.Text("ok"))
	r := req("q")
	r.ContextTokens = 32768
	if _, err := c.Chat(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	if got := srv.LastChat().Options["num_ctx"]; got != float64(32768) {
		t.Fatalf("num_ctx %v, want 32768", got)
	}
	if _, err := c.Chat(ctx(t), req("q")); err != nil {
		t.Fatal(err)
	}
	if got, ok := srv.LastChat().Options["num_ctx"]; ok {
		t.Fatalf("num_ctx %v sent without ContextTokens (the model's default applies)", got)
	}
}
