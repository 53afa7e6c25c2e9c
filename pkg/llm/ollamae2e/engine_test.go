package ollamae2e

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/tools/tinymodel/tiny"
)

// TestNewEngine runs a second server with OLLAMA_NEW_ENGINE=1 (Ollama's own
// Go engine instead of llama.cpp). Chat, tools and structured output work
// there too; /api/embed answers 501 "this model does not support
// embeddings", which pkg/llm must classify as a permanent invalid request
// (a misconfigured embedding model, not an outage).
func TestNewEngine(t *testing.T) {
	shared := need(t)
	s, err := start(shared.bin, "OLLAMA_NEW_ENGINE=1")
	if s != nil {
		defer s.stop()
	}
	if err != nil {
		t.Fatalf("new-engine server: %v\n%s", err, s.logTail(3000))
	}
	cfg := llm.DefaultConfig()
	cfg.Host = s.url
	chat := llm.ModelConfig{Name: chatModel, Timeout: 2 * time.Minute}
	cfg.Extract, cfg.Consolidate, cfg.Summarize = chat, chat, chat
	cfg.Embed = llm.ModelConfig{Name: embedModel, Timeout: time.Minute}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)

	resp, err := c.Chat(ctx, llm.Request{Role: llm.RoleConsolidate, Project: "p1",
		Messages: []llm.Message{llm.User("Look. " + tiny.CallControl(0))}, Tools: []llm.ToolSpec{recallTool.Spec()}})
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	if len(resp.Message.ToolCalls) != 1 {
		t.Errorf("new engine: want one tool call, got %+v content %q", resp.Message.ToolCalls, resp.Message.Content)
	}
	v, _, err := llm.Structured[probeReply](ctx, c, llm.Request{Role: llm.RoleExtract, Messages: []llm.Message{llm.User("x")}})
	if err != nil {
		t.Errorf("new engine structured: %v", err)
	} else if len(v.Memories) < 1 {
		t.Errorf("new engine structured: %+v", v)
	}

	_, err = c.Embedder().Embed(ctx, []string{"hi"})
	if !errors.Is(err, llm.ErrInvalidRequest) || llm.Classify(err) != llm.ClassPermanent {
		t.Errorf("new-engine embed: %v (class %v), want ErrInvalidRequest, permanent", err, llm.Classify(err))
	}
	if err != nil && (!strings.Contains(err.Error(), "501") || !strings.Contains(err.Error(), "does not support embeddings")) {
		t.Errorf("new-engine embed error %q does not carry the server's 501", err)
	}
}
