package ollamae2e

import (
	"context"
	"testing"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/tools/tinymodel/tiny"
)

// Per-call latencies against the real server and the tiny model: the cost
// of Ollama's own request path (template, tokenizer, grammar, parser), not
// of a real model. Run: bash scripts/ollama.sh test -run '^$' -bench . -benchtime 20x

func BenchmarkChat(b *testing.B) {
	c := client(b)
	req := llm.Request{Role: llm.RoleSummarize, Project: "bench", Messages: []llm.Message{llm.User("Say something.")}}
	warm(b, func(ctx context.Context) error { _, err := c.Chat(ctx, req); return err })
	for b.Loop() {
		if _, err := c.Chat(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStructured(b *testing.B) {
	c := client(b)
	req := llm.Request{Role: llm.RoleExtract, Project: "bench", Messages: []llm.Message{llm.User("Extract.")}}
	call := func(ctx context.Context) error { _, _, err := llm.Structured[probeReply](ctx, c, req); return err }
	warm(b, call)
	for b.Loop() {
		if err := call(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkToolCall(b *testing.B) {
	c := client(b)
	req := llm.Request{Role: llm.RoleConsolidate, Project: "bench",
		Messages: []llm.Message{llm.User("Look. " + tiny.CallControl(0))}, Tools: []llm.ToolSpec{recallTool.Spec()}}
	warm(b, func(ctx context.Context) error { _, err := c.Chat(ctx, req); return err })
	for b.Loop() {
		resp, err := c.Chat(context.Background(), req)
		if err != nil || len(resp.Message.ToolCalls) != 1 {
			b.Fatalf("%v %+v", err, resp.Message)
		}
	}
}

func BenchmarkEmbed8(b *testing.B) {
	e := client(b).Embedder()
	texts := []string{"a", "bb", "ccc", "the user prefers tabs", "e", "f", "g", "h"}
	warm(b, func(ctx context.Context) error { _, err := e.Embed(ctx, texts); return err })
	for b.Loop() {
		if _, err := e.Embed(context.Background(), texts); err != nil {
			b.Fatal(err)
		}
	}
}

// warm makes one call before the clock starts, so the model load is not
// counted.
func warm(b *testing.B, f func(context.Context) error) {
	b.Helper()
	if err := f(context.Background()); err != nil {
		b.Fatal(err)
	}
}
