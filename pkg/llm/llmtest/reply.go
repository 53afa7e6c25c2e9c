package llmtest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/ollama/ollama/api"
)

// Reply is one scripted answer of the server: a model reply (text, JSON,
// tool calls) or a fault (an HTTP error, a hang, a malformed body). Build one
// with the functions below and adjust it with its methods.
type Reply struct {
	content    string
	toolCalls  []api.ToolCall
	doneReason string

	status int    // fault: HTTP status with {"error": errMsg}
	errMsg string //
	body   string // fault: raw body written with status 200
	rawSet bool
	hang   bool

	delay        time.Duration
	promptTokens int
	evalTokens   int
	noTokens     bool

	example bool                        // a valid instance of the request's format schema
	fn      func(api.ChatRequest) Reply // computed from the request
}

// Text replies with plain content.
func Text(content string) Reply { return Reply{content: content} }

// JSON replies with v marshalled as the content (for a structured call).
func JSON(v any) Reply {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("llmtest.JSON: %v", err))
	}
	return Reply{content: string(b)}
}

// Example replies with a small valid instance of the schema the request sent
// as its format (enum strings take their first value, strings "x", numbers
// their lower bound or 0, arrays their minItems).
func Example() Reply { return Reply{example: true} }

// Func computes the reply from the request.
func Func(fn func(req api.ChatRequest) Reply) Reply { return Reply{fn: fn} }

// Call is one tool call in a ToolCalls reply. Args is marshalled to JSON and
// must be an object (a map or a struct) to be a well-formed call.
type Call struct {
	Name string
	Args any
}

// ToolCall replies with one tool call.
func ToolCall(name string, args any) Reply { return ToolCalls(Call{name, args}) }

// ToolCalls replies with tool calls, as Ollama returns them in
// message.tool_calls.
func ToolCalls(calls ...Call) Reply {
	r := Reply{}
	for i, c := range calls {
		args := api.NewToolCallFunctionArguments()
		b, err := json.Marshal(c.Args)
		if err != nil {
			panic(fmt.Sprintf("llmtest.ToolCalls: %v", err))
		}
		if c.Args != nil {
			if err := json.Unmarshal(b, &args); err != nil {
				panic(fmt.Sprintf("llmtest.ToolCalls: arguments of %q must be a JSON object: %v", c.Name, err))
			}
		}
		r.toolCalls = append(r.toolCalls, api.ToolCall{
			ID:       fmt.Sprintf("call_%d", i),
			Function: api.ToolCallFunction{Index: i, Name: c.Name, Arguments: args},
		})
	}
	return r
}

// ToolCallInContent replies with a tool call written into the content, as
// Ollama does when its brace-counting parser fails on a "}" inside a string.
func ToolCallInContent(name string, args any) Reply {
	b, err := json.Marshal(map[string]any{"name": name, "arguments": args})
	if err != nil {
		panic(fmt.Sprintf("llmtest.ToolCallInContent: %v", err))
	}
	return Reply{content: string(b)}
}

// Truncated replies with partial content and done_reason "length", as Ollama
// does when num_predict runs out in the middle of the JSON.
func Truncated(partial string) Reply { return Reply{content: partial, doneReason: "length"} }

// Status is a fault: the HTTP status with Ollama's {"error": msg} body.
func Status(code int, msg string) Reply { return Reply{status: code, errMsg: msg} }

// ModelMissing is Ollama's 404 for a model that is not installed, worded as
// Ollama words it on the path it is used on.
func ModelMissing() Reply { return Reply{status: http.StatusNotFound} }

// ServerError is a 500 with msg.
func ServerError(msg string) Reply { return Status(http.StatusInternalServerError, msg) }

// Busy is Ollama's 503 when its queue is full.
func Busy() Reply {
	return Status(http.StatusServiceUnavailable, "server busy, please try again.  maximum pending requests exceeded")
}

// InvalidSchema is the 500 a real Ollama returns for a format schema its
// grammar converter rejects.
func InvalidSchema() Reply { return ServerError("invalid JSON schema in format") }

// Hang never answers: the request stays open until the client gives up (its
// timeout) or the server closes.
func Hang() Reply { return Reply{hang: true} }

// MalformedBody answers 200 with a body that is not JSON.
func MalformedBody() Reply {
	return Reply{body: `{"model":"x","message":{"role":"assistant","content":"tru`, rawSet: true}
}

// After delays the reply by d.
func (r Reply) After(d time.Duration) Reply { r.delay = d; return r }

// Tokens sets the prompt_eval_count and eval_count reported.
func (r Reply) Tokens(prompt, completion int) Reply {
	r.promptTokens, r.evalTokens, r.noTokens = prompt, completion, false
	return r
}

// NoTokens reports no token counts (the client must estimate).
func (r Reply) NoTokens() Reply { r.noTokens = true; return r }

// Done sets done_reason (default "stop").
func (r Reply) Done(reason string) Reply { r.doneReason = reason; return r }

// Matcher selects chat requests.
type Matcher func(req api.ChatRequest) bool

// Any matches every request.
func Any() Matcher { return func(api.ChatRequest) bool { return true } }

// Model matches requests for the model (":latest" implied).
func Model(name string) Matcher {
	return func(r api.ChatRequest) bool { return normalName(r.Model) == normalName(name) }
}

// Contains matches when any message contains s.
func Contains(s string) Matcher {
	return func(r api.ChatRequest) bool {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, s) {
				return true
			}
		}
		return false
	}
}

// SystemContains matches when a system message contains s.
func SystemContains(s string) Matcher {
	return func(r api.ChatRequest) bool {
		for _, m := range r.Messages {
			if m.Role == "system" && strings.Contains(m.Content, s) {
				return true
			}
		}
		return false
	}
}

// LastContains matches when the last message contains s.
func LastContains(s string) Matcher {
	return func(r api.ChatRequest) bool {
		return len(r.Messages) > 0 && strings.Contains(r.Messages[len(r.Messages)-1].Content, s)
	}
}

// LastFrom matches when the last message has the given role ("user", "tool").
func LastFrom(role string) Matcher {
	return func(r api.ChatRequest) bool {
		return len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Role == role
	}
}

// HasFormat matches structured-output requests.
func HasFormat() Matcher {
	return func(r api.ChatRequest) bool { return len(r.Format) > 0 && string(r.Format) != "null" }
}

// HasTool matches requests offering the named tool.
func HasTool(name string) Matcher {
	return func(r api.ChatRequest) bool {
		for _, t := range r.Tools {
			if t.Function.Name == name {
				return true
			}
		}
		return false
	}
}

// And matches when every matcher does.
func And(ms ...Matcher) Matcher {
	return func(r api.ChatRequest) bool {
		for _, m := range ms {
			if m != nil && !m(r) {
				return false
			}
		}
		return true
	}
}

// Not inverts a matcher.
func Not(m Matcher) Matcher { return func(r api.ChatRequest) bool { return !m(r) } }

// normalName adds Ollama's implicit ":latest".
func normalName(n string) string {
	if n == "" {
		return n
	}
	if i := strings.LastIndex(n, "/"); !strings.Contains(n[i+1:], ":") {
		return n + ":latest"
	}
	return n
}

// exampleOf builds a valid instance of a JSON schema (the subset Engram sends).
func exampleOf(s map[string]any) any {
	num := func(k string) (float64, bool) {
		f, ok := s[k].(float64)
		return f, ok
	}
	typ, _ := s["type"].(string)
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		for k, v := range props {
			if ps, ok := v.(map[string]any); ok {
				out[k] = exampleOf(ps)
			}
		}
		return out
	case "array":
		n, _ := num("minItems")
		items, _ := s["items"].(map[string]any)
		out := make([]any, int(n))
		for i := range out {
			out[i] = exampleOf(items)
		}
		return out
	case "string":
		n := 1.0
		if m, ok := num("minLength"); ok && m > n {
			n = m
		}
		if m, ok := num("maxLength"); ok && m < n {
			n = m
		}
		return strings.Repeat("x", int(n))
	case "integer", "number":
		v := 0.0
		if m, ok := num("minimum"); ok && m > 0 {
			v = m
		}
		if m, ok := num("maximum"); ok && m < 0 {
			v = m
		}
		if typ == "integer" {
			v = math.Ceil(v)
		}
		return v
	case "boolean":
		return false
	}
	return nil
}
