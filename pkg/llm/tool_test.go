package llm_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

type rememberArgs struct {
	Label string   `json:"label" llm:"maxLength=40" desc:"short name"`
	Kind  string   `json:"kind" llm:"enum=decision|preference"`
	Tags  []string `json:"tags,omitempty" llm:"maxItems=3,maxLength=16"`
	Conf  float64  `json:"confidence" llm:"minimum=0,maximum=1,optional"`
}

var remember = llm.MustTool[rememberArgs]("remember", "Store a memory")

type recallArgs struct {
	Query string `json:"query" llm:"maxLength=200"`
}

var recall = llm.MustTool[recallArgs]("recall", "Search memories")

// The tools JSON is what Ollama's tool-calling documentation shows:
// [{"type":"function","function":{"name","description","parameters":
// {"type":"object","required":[...],"properties":{...}}}}].
func TestToolsSendDocumentedJSON(t *testing.T) {
	srv := llmtest.New(t)
	srv.Enqueue(llmtest.Text("ok"))
	r := req("hi")
	r.Tools = []llm.ToolSpec{remember.Spec()}
	if _, err := srv.Client().Chat(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Tools json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(srv.Chats()[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"function","function":{"name":"remember","description":"Store a memory","parameters":{` +
		`"type":"object","required":["label","kind"],"properties":{` +
		`"label":{"type":"string","description":"short name (at most 40 characters)"},` +
		`"kind":{"type":"string","enum":["decision","preference"]},` +
		`"tags":{"type":"array","items":{"type":"string","maxLength":16},"description":"(at most 3 items)"},` +
		`"confidence":{"type":"number","description":"(minimum 0, maximum 1)"}}}}}]`
	if string(sent.Tools) != want {
		t.Fatalf("tools JSON\n got %s\nwant %s", sent.Tools, want)
	}
	// And the server decoded it with Ollama's own types.
	got := srv.LastChat().Tools
	if len(got) != 1 || got[0].Function.Name != "remember" || got[0].Function.Parameters.Properties.Len() != 4 {
		t.Fatalf("server saw tools %v", got)
	}
}

func TestToolDecode(t *testing.T) {
	call := func(args string) llm.ToolCall {
		return llm.ToolCall{Name: "remember", Arguments: json.RawMessage(args)}
	}
	a, err := remember.Decode(call(`{"label":"use tabs","kind":"preference","tags":["style"]}`))
	if err != nil || a.Label != "use tabs" || a.Kind != "preference" || a.Tags[0] != "style" {
		t.Fatalf("decode = %+v, %v", a, err)
	}
	// Arguments sent as a JSON string holding the object.
	a, err = remember.Decode(call(`"{\"label\":\"x\",\"kind\":\"decision\"}"`))
	if err != nil || a.Label != "x" {
		t.Fatalf("string-wrapped decode = %+v, %v", a, err)
	}
	bad := []struct{ args, field string }{
		{`{"label":5,"kind":"decision"}`, `field "label": must be a string, got number`},
		{`{"label":"x","kind":"fact"}`, `field "kind": is "fact", must be one of`},
		{`{"kind":"decision"}`, `field "label": is required but missing`},
		{`{"label":"x","kind":"decision","confidence":1.5}`, `field "confidence": is 1.5, at most 1 allowed`},
		{`{"label":"x","kind":"decision","tags":["a","b","c","d"]}`, `field "tags": has 4 items, at most 3 allowed`},
		{`{"label":"x","kind":"decision","when":"now"}`, `field "when": is not an allowed field`},
		{`{"label":"x"`, `not valid JSON`},
		{`[]`, `must be an object`},
	}
	for _, b := range bad {
		_, err := remember.Decode(call(b.args))
		if !errors.Is(err, llm.ErrInvalidArguments) || !strings.Contains(err.Error(), b.field) {
			t.Errorf("Decode(%s) = %v, want ErrInvalidArguments naming %q", b.args, err, b.field)
		}
	}
	if _, err := remember.Decode(llm.ToolCall{Name: "recall", Arguments: json.RawMessage(`{}`)}); !errors.Is(err, llm.ErrInvalidArguments) {
		t.Errorf("decoding another tool's call: %v", err)
	}
}

// A tool call with wrong arguments comes back as a call; decoding it gives a
// field-naming error that the loop hands back to the model.
func TestToolCallWrongArgumentsOverHTTP(t *testing.T) {
	srv := llmtest.New(t)
	srv.Enqueue(llmtest.ToolCall("remember", map[string]any{"label": strings.Repeat("l", 41), "kind": "decision"}))
	r := req("hi")
	r.Tools = []llm.ToolSpec{remember.Spec()}
	resp, err := srv.Client().Chat(ctx(t), r)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 {
		t.Fatalf("tool calls %+v", resp.Message.ToolCalls)
	}
	_, err = remember.Decode(resp.Message.ToolCalls[0])
	if !errors.Is(err, llm.ErrInvalidArguments) || !strings.Contains(err.Error(), `field "label": is 41 characters long`) {
		t.Fatalf("err = %v", err)
	}
}

// Ollama's parser counts braces without skipping strings: a call whose
// argument contains "}" comes back as content. It is recognised as a call
// when tools were offered and it names one of them.
func TestToolCallInContent(t *testing.T) {
	args := map[string]any{"label": "use {} in templates}", "kind": "decision"}
	cases := []struct {
		name    string
		reply   llmtest.Reply
		tools   []llm.ToolSpec
		asCalls int
	}{
		{"plain", llmtest.ToolCallInContent("remember", args), []llm.ToolSpec{remember.Spec()}, 1},
		{"tagged", llmtest.Text(`<tool_call>{"name":"remember","arguments":{"label":"a}","kind":"decision"}}</tool_call>`), []llm.ToolSpec{remember.Spec()}, 1},
		{"parameters key", llmtest.Text(`{"name":"recall","parameters":{"query":"}"}}`), []llm.ToolSpec{recall.Spec()}, 1},
		{"function wrapper", llmtest.Text(`{"type":"function","function":{"name":"recall","arguments":{"query":"q"}}}`), []llm.ToolSpec{recall.Spec()}, 1},
		{"array of two", llmtest.Text(`[{"name":"recall","arguments":{"query":"a"}},{"name":"remember","arguments":{"label":"b","kind":"decision"}}]`),
			[]llm.ToolSpec{recall.Spec(), remember.Spec()}, 2},
		{"not offered", llmtest.ToolCallInContent("forget", args), []llm.ToolSpec{remember.Spec()}, 0},
		{"no tools", llmtest.ToolCallInContent("remember", args), nil, 0},
		{"prose", llmtest.Text(`I will call {"name":"remember"} later`), []llm.ToolSpec{remember.Spec()}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Enqueue(c.reply)
			r := req("hi")
			r.Tools = c.tools
			resp, err := srv.Client().Chat(ctx(t), r)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Message.ToolCalls) != c.asCalls {
				t.Fatalf("%d tool calls (%+v), want %d", len(resp.Message.ToolCalls), resp.Message.ToolCalls, c.asCalls)
			}
			if c.asCalls == 0 {
				if resp.Message.Content == "" {
					t.Fatal("content dropped")
				}
				return
			}
			if resp.Message.Content != "" {
				t.Errorf("content %q kept next to recognised calls", resp.Message.Content)
			}
			if c.name == "plain" {
				a, err := remember.Decode(resp.Message.ToolCalls[0])
				if err != nil || a.Label != "use {} in templates}" {
					t.Fatalf("decoded %+v, %v", a, err)
				}
			}
		})
	}
}

// A tool loop: the model calls a tool, the result goes back as a "tool"
// message (with the assistant's call before it), the model answers.
func TestToolLoopOverHTTP(t *testing.T) {
	srv := llmtest.New(t)
	srv.OnChat(llmtest.LastFrom("user"), llmtest.ToolCall("recall", map[string]any{"query": "editor"}))
	srv.OnChat(llmtest.LastFrom("tool"), llmtest.Text("You prefer vim."))
	c := srv.Client()
	r := llm.Request{Role: llm.RoleConsolidate, Project: "p", Messages: []llm.Message{llm.User("which editor?")},
		Tools: []llm.ToolSpec{recall.Spec()}}
	for step := 0; step < 4; step++ {
		resp, err := c.Chat(ctx(t), r)
		if err != nil {
			t.Fatal(err)
		}
		r.Messages = append(r.Messages, resp.Message)
		if len(resp.Message.ToolCalls) == 0 {
			if resp.Message.Content != "You prefer vim." {
				t.Fatalf("final reply %q", resp.Message.Content)
			}
			break
		}
		for _, tc := range resp.Message.ToolCalls {
			a, err := recall.Decode(tc)
			if err != nil {
				t.Fatal(err)
			}
			r.Messages = append(r.Messages, llm.ToolResult(tc.Name, "preference: vim (query "+a.Query+")"))
		}
	}
	reqs := srv.ChatRequests()
	if len(reqs) != 2 {
		t.Fatalf("%d calls, want 2", len(reqs))
	}
	m := reqs[1].Messages
	if len(m) != 3 || m[1].Role != "assistant" || len(m[1].ToolCalls) != 1 || m[1].ToolCalls[0].Function.Name != "recall" {
		t.Fatalf("second request messages %+v", m)
	}
	if q, _ := m[1].ToolCalls[0].Function.Arguments.Get("query"); q != "editor" {
		t.Fatalf("assistant tool call arguments %v", m[1].ToolCalls[0].Function.Arguments.String())
	}
	if m[2].Role != "tool" || m[2].ToolName != "recall" || !strings.Contains(m[2].Content, "vim") {
		t.Fatalf("tool result message %+v", m[2])
	}
}

func TestToolResultCarriesCallID(t *testing.T) {
	srv := llmtest.New(t)
	srv.Enqueue(llmtest.ToolCall("recall", map[string]any{"query": "q"}), llmtest.Text("done"))
	c := srv.Client()
	r := req("hi")
	r.Tools = []llm.ToolSpec{recall.Spec()}
	resp, err := c.Chat(ctx(t), r)
	if err != nil || len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].ID != "call_0" {
		t.Fatalf("%+v %v", resp, err)
	}
	r.Messages = append(r.Messages, resp.Message, llm.ToolResultFor(resp.Message.ToolCalls[0], "nothing"))
	if _, err := c.Chat(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	m := srv.LastChat().Messages
	if got := m[len(m)-1]; got.Role != "tool" || got.ToolCallID != "call_0" || got.ToolName != "recall" {
		t.Fatalf("tool message %+v", got)
	}
	if got := m[len(m)-2]; len(got.ToolCalls) != 1 || got.ToolCalls[0].ID != "call_0" {
		t.Fatalf("assistant message %+v", got)
	}
}

func TestRegisterTool(t *testing.T) {
	llm.RegisterTool(recall.Spec())
	for _, e := range llm.Schemas() {
		if e.Name == "tool.recall" {
			if e.Kind != "tool" || e.Tool == nil || e.Tool.Name != "recall" || e.Schema.Property("query") == nil {
				t.Fatalf("entry %+v", e)
			}
			return
		}
	}
	t.Fatal("tool.recall not registered")
}
