package ollamae2e

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/tools/tinymodel/tiny"
)

// recallArgs are the arguments of the tool the tiny model calls.
type recallArgs struct {
	Query string `json:"query" llm:"maxLength=200" desc:"what to look for"`
}

var recallTool = llm.MustTool[recallArgs]("recall", "Search memory.")

func TestCheck(t *testing.T) {
	c := client(t)
	rd, err := c.Check(ctxT(t))
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if rd.Version != pinnedVersion {
		t.Errorf("version %q, want %s", rd.Version, pinnedVersion)
	}
	for _, m := range rd.Models {
		if !m.Present {
			t.Errorf("model %s (%s) not present", m.Model, m.Role)
		}
	}
	if rd.EmbedDim != tiny.Width {
		t.Errorf("embed dim %d, want the model width %d", rd.EmbedDim, tiny.Width)
	}
}

func TestChatPlainReply(t *testing.T) {
	c := client(t)
	for i := 0; i < 3; i++ {
		resp, err := c.Chat(ctxT(t), llm.Request{Role: llm.RoleSummarize, Project: "p1",
			Messages: []llm.Message{llm.System("You are terse."), llm.User("Say something.")}})
		if err != nil {
			t.Fatalf("chat: %v", err)
		}
		// The end-token bias makes the reply end by itself; the newline
		// channel makes it non-empty.
		if resp.DoneReason != "stop" {
			t.Errorf("done reason %q, want stop (content %q)", resp.DoneReason, resp.Message.Content)
		}
		if resp.Message.Content == "" {
			t.Error("empty reply")
		}
		for _, r := range resp.Message.Content {
			if r > unicode.MaxASCII {
				t.Errorf("non-ASCII %q in %q", r, resp.Message.Content)
				break
			}
		}
		if resp.Estimated || resp.PromptTokens == 0 || resp.CompletionTokens == 0 {
			t.Errorf("token counts %d/%d estimated=%v, want Ollama's", resp.PromptTokens, resp.CompletionTokens, resp.Estimated)
		}
		if resp.Model != chatModel && resp.Model != chatModel+":latest" {
			t.Errorf("model %q", resp.Model)
		}
		if len(resp.Message.ToolCalls) != 0 {
			t.Errorf("tool calls without tools: %+v", resp.Message.ToolCalls)
		}
	}
}

// TestToolCallRoundTrip: the control token makes the model call recall with
// fixed arguments; the result goes back; the model replies with text.
func TestToolCallRoundTrip(t *testing.T) {
	c := client(t)
	ctx := ctxT(t)
	msgs := []llm.Message{
		llm.System("You manage memory."),
		llm.User("Look this up. " + tiny.CallControl(0)),
	}
	req := llm.Request{Role: llm.RoleConsolidate, Project: "p1", Messages: msgs, Tools: []llm.ToolSpec{recallTool.Spec()}}
	resp, err := c.Chat(ctx, req)
	if err != nil {
		t.Fatalf("chat 1: %v", err)
	}
	if len(resp.Message.ToolCalls) != 1 {
		t.Fatalf("want one tool call, got %+v (content %q)", resp.Message.ToolCalls, resp.Message.Content)
	}
	call := resp.Message.ToolCalls[0]
	args, err := recallTool.Decode(call)
	if err != nil {
		t.Fatalf("decode %s: %v", call.Arguments, err)
	}
	if want := testCalls[0].Arguments["query"]; args.Query != want {
		t.Errorf("query %q, want %q", args.Query, want)
	}
	if strings.TrimSpace(resp.Message.Content) != "" {
		t.Errorf("content next to the call: %q", resp.Message.Content)
	}

	// call -> result -> reply.
	req.Messages = append(msgs,
		llm.Message{Author: llm.AuthorAssistant, ToolCalls: resp.Message.ToolCalls},
		llm.ToolResult("recall", `{"memories":[{"label":"tiny","body":"a test model"}]}`))
	resp2, err := c.Chat(ctx, req)
	if err != nil {
		t.Fatalf("chat 2: %v", err)
	}
	if len(resp2.Message.ToolCalls) != 0 {
		t.Errorf("the model called again after the result: %+v", resp2.Message.ToolCalls)
	}
	if resp2.Message.Content == "" || resp2.DoneReason != "stop" {
		t.Errorf("reply %q done %q, want text that ends by itself", resp2.Message.Content, resp2.DoneReason)
	}
}

// TestToolCallWithoutControlToken: offered tools, the model answers in text.
func TestToolCallWithoutControlToken(t *testing.T) {
	c := client(t)
	resp, err := c.Chat(ctxT(t), llm.Request{Role: llm.RoleConsolidate, Project: "p1",
		Messages: []llm.Message{llm.User("Just chat.")}, Tools: []llm.ToolSpec{recallTool.Spec()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 0 || resp.Message.Content == "" {
		t.Errorf("calls %+v content %q, want text only", resp.Message.ToolCalls, resp.Message.Content)
	}
}

// braceCases are what the pinned Ollama does with a tool call whose string
// argument contains '}' (docs/ollama.md). If a new version changes it, the
// test says so.
//   - "parsed": Ollama returns the call with the right arguments;
//   - "content": Ollama leaves the call in the message content;
//   - "misparsed": Ollama returns a call with wrong arguments.
var braceCases = []struct {
	name     string
	model    string
	call     int    // index into testCalls
	behavior string // what ollama 0.17.4 does
}{
	// Tag <tool_call>, the whole call in one token: the parser's
	// string-aware brace matching finds the object.
	{"tagged one chunk", chatModel, 1, "parsed"},
	// Tag "{" (template renders bare JSON), the call streamed in pieces that
	// end at each '}': the parser's done() counts braces without skipping
	// strings, decides the object closed at the '}' after the string, and
	// gives up before the real end.
	{"bare streamed", bareModel, 2, "content"},
	// Control: the same bare streamed call without '}' in the string.
	{"bare streamed, no brace in the string", bareModel, 3, "parsed"},
}

// TestToolCallBraceInString records how Ollama parses a tool call whose
// string argument contains '}', and checks that pkg/llm ends up with the
// right call either way.
func TestToolCallBraceInString(t *testing.T) {
	s := need(t)
	for _, bc := range braceCases {
		t.Run(bc.name, func(t *testing.T) {
			ctx := ctxT(t)
			want := testCalls[bc.call].Arguments["query"].(string)
			prompt := "Look. " + tiny.CallControl(bc.call)

			// Straight through the api package: what does the server do?
			stream := false
			var raw api.ChatResponse
			err := s.api.Chat(ctx, &api.ChatRequest{Model: bc.model, Stream: &stream,
				Messages: []api.Message{{Role: "user", Content: prompt}},
				Tools:    []api.Tool{toAPITool(t, recallTool.Spec())},
			}, func(r api.ChatResponse) error { raw = r; return nil })
			if err != nil {
				t.Fatal(err)
			}
			got := "content"
			if len(raw.Message.ToolCalls) > 0 {
				got = "misparsed"
				if q, _ := raw.Message.ToolCalls[0].Function.Arguments.Get("query"); q == want && len(raw.Message.ToolCalls) == 1 {
					got = "parsed"
				}
			} else if !strings.Contains(raw.Message.Content, want) {
				t.Errorf("no tool call and the call is not in the content either: %q", raw.Message.Content)
			}
			calls, _ := json.Marshal(raw.Message.ToolCalls)
			t.Logf("ollama %s, %s, argument %q: %s (tool calls %s, content %q)", s.version, bc.model, want, got, calls, raw.Message.Content)
			if got != bc.behavior {
				t.Errorf("ollama %s: %s gives %q, docs/ollama.md says %q: update both", s.version, bc.name, got, bc.behavior)
			}

			// Through pkg/llm: one call with the exact argument.
			c := client(t, func(cfg *llm.Config) { cfg.Consolidate.Name = bc.model })
			resp, err := c.Chat(ctx, llm.Request{Role: llm.RoleConsolidate, Project: "p1",
				Messages: []llm.Message{llm.User(prompt)}, Tools: []llm.ToolSpec{recallTool.Spec()}})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Message.ToolCalls) != 1 {
				t.Fatalf("pkg/llm: want one call, got %+v content %q", resp.Message.ToolCalls, resp.Message.Content)
			}
			args, err := recallTool.Decode(resp.Message.ToolCalls[0])
			if err != nil {
				t.Fatal(err)
			}
			if args.Query != want {
				t.Errorf("pkg/llm: query %q, want %q", args.Query, want)
			}
		})
	}
}

// toAPITool renders a ToolSpec the way Ollama's api package wants it, via
// JSON (the schema's own MarshalJSON), for the raw-API tests.
func toAPITool(t testing.TB, spec llm.ToolSpec) api.Tool {
	t.Helper()
	params, err := json.Marshal(spec.Parameters)
	if err != nil {
		t.Fatal(err)
	}
	var at api.Tool
	doc := `{"type":"function","function":{"name":` + quote(spec.Name) + `,"description":` + quote(spec.Description) + `,"parameters":` + string(params) + `}}`
	if err := json.Unmarshal([]byte(doc), &at); err != nil {
		t.Fatalf("tool %s as api.Tool: %v", spec.Name, err)
	}
	return at
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestModelMissing(t *testing.T) {
	c := client(t, func(cfg *llm.Config) {
		cfg.Extract.Name = "engram-absent"
		cfg.Embed.Name = "engram-absent-embed"
	})
	ctx := ctxT(t)
	_, err := c.Chat(ctx, llm.Request{Role: llm.RoleExtract, Messages: []llm.Message{llm.User("hi")}})
	if !errors.Is(err, llm.ErrModelMissing) {
		t.Errorf("chat with a missing model: %v, want ErrModelMissing", err)
	} else if !strings.Contains(err.Error(), "ollama pull engram-absent") {
		t.Errorf("message does not say how to fix it: %v", err)
	}
	_, err = c.Embedder().Embed(ctx, []string{"hi"})
	if !errors.Is(err, llm.ErrModelMissing) {
		t.Errorf("embed with a missing model: %v, want ErrModelMissing", err)
	}
	// The other roles still work.
	if _, err := c.Chat(ctx, llm.Request{Role: llm.RoleSummarize, Messages: []llm.Message{llm.User("hi")}}); err != nil {
		t.Errorf("summarize with the present model: %v", err)
	}
	rd, err := c.Check(ctx)
	if !errors.Is(err, llm.ErrModelMissing) || !strings.Contains(err.Error(), "engram-absent") {
		t.Errorf("Check: %v, want ErrModelMissing naming the model", err)
	}
	if rd.Version != pinnedVersion {
		t.Errorf("Check version %q", rd.Version)
	}
}

// TestInvalidSchemaIsPermanent: a schema the client accepts but llama.cpp's
// schema-to-grammar rejects comes back as HTTP 500 "invalid JSON schema in
// format", classified as a permanent invalid request.
func TestInvalidSchemaIsPermanent(t *testing.T) {
	c := client(t)
	max := 10
	bad := &llm.Schema{Type: "object", Properties: []llm.Property{
		{Name: "x", Schema: &llm.Schema{Type: "widget"}},
		{Name: "y", Schema: &llm.Schema{Type: "string", MaxLength: &max}},
	}, Required: []string{"x", "y"}}
	_, err := c.Chat(ctxT(t), llm.Request{Role: llm.RoleExtract, Messages: []llm.Message{llm.User("hi")}, Format: bad})
	if !errors.Is(err, llm.ErrInvalidRequest) {
		t.Fatalf("invalid schema: %v, want ErrInvalidRequest", err)
	}
	if llm.Classify(err) != llm.ClassPermanent {
		t.Errorf("class %v, want permanent", llm.Classify(err))
	}
	if !strings.Contains(err.Error(), "invalid JSON schema in format") || !strings.Contains(err.Error(), "500") {
		t.Errorf("error %q does not carry the server's 500 message", err)
	}
}

// TestTimeoutIsUnavailable: a call cut by its own timeout is transient; one
// whose caller gave up is canceled; the server keeps serving.
func TestTimeoutIsUnavailable(t *testing.T) {
	c := client(t)
	ctx := ctxT(t)
	_, err := c.Chat(ctx, llm.Request{Role: llm.RoleExtract, Messages: []llm.Message{llm.User("hi")},
		Timeout: time.Millisecond, MaxTokens: 2000})
	if !errors.Is(err, llm.ErrUnavailable) || llm.Classify(err) != llm.ClassTransient {
		t.Errorf("timed-out call: %v (class %v), want ErrUnavailable, transient", err, llm.Classify(err))
	}
	_, err = c.Embedder().Embed(ctx, []string{"a"})
	if err != nil {
		t.Errorf("embed after a timeout: %v", err)
	}
	resp, err := c.Chat(ctx, llm.Request{Role: llm.RoleExtract, Messages: []llm.Message{llm.User("hi")}})
	if err != nil || resp.Message.Content == "" {
		t.Errorf("chat after a timeout: %v %q", err, resp.Message.Content)
	}
}

// TestKeepAlive: the configured keep-alive reaches the server (/api/ps).
func TestKeepAlive(t *testing.T) {
	s := need(t)
	for _, tc := range []struct {
		name     string
		keep     time.Duration
		min, max time.Duration
	}{
		{"42m", 42 * time.Minute, 40 * time.Minute, 43 * time.Minute},
		{"forever", -1, 24 * 365 * time.Hour, math.MaxInt64},
		{"7m", 7 * time.Minute, 5 * time.Minute, 8 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := client(t, func(cfg *llm.Config) {
				cfg.Extract.KeepAlive = tc.keep
				cfg.Embed.KeepAlive = tc.keep
			})
			ctx := ctxT(t)
			if _, err := c.Chat(ctx, llm.Request{Role: llm.RoleExtract, Messages: []llm.Message{llm.User("hi")}}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Embedder().Embed(ctx, []string{"hi"}); err != nil {
				t.Fatal(err)
			}
			ps, err := s.api.ListRunning(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// The two model names share one GGUF blob, and Ollama 0.17.4
			// serves both from one runner: /api/ps lists the chat model
			// only, with the keep-alive of the last call.
			seen := 0
			for _, m := range ps.Models {
				if m.Name != chatModel+":latest" && m.Name != embedModel+":latest" {
					continue
				}
				seen++
				left := time.Until(m.ExpiresAt)
				if left < tc.min || left > tc.max {
					t.Errorf("%s expires in %v, want between %v and %v", m.Name, left, tc.min, tc.max)
				}
			}
			if seen == 0 {
				t.Errorf("no tiny model loaded: %+v", ps.Models)
			}
		})
	}
}
