package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Tool is a tool whose arguments are a T. Offer Spec() in Request.Tools and
// turn the model's calls back into a T with Decode.
type Tool[T any] struct {
	spec ToolSpec
}

// NewTool builds a tool named name whose parameters are the JSON Schema of T
// (see [SchemaFor] for the tags).
func NewTool[T any](name, description string) (*Tool[T], error) {
	if name == "" {
		return nil, errors.New("llm: tool without a name")
	}
	s, err := SchemaFor[T]()
	if err != nil {
		return nil, fmt.Errorf("llm: tool %q: %w", name, err)
	}
	return &Tool[T]{spec: ToolSpec{Name: name, Description: description, Parameters: s}}, nil
}

// MustTool is NewTool that panics, for package-level tool definitions.
func MustTool[T any](name, description string) *Tool[T] {
	t, err := NewTool[T](name, description)
	if err != nil {
		panic(err)
	}
	return t
}

// Name is the tool's name.
func (t *Tool[T]) Name() string { return t.spec.Name }

// Spec is what goes in Request.Tools.
func (t *Tool[T]) Spec() ToolSpec { return t.spec }

// Decode turns a call of this tool into its arguments. The error wraps
// ErrInvalidArguments and names each wrong field; hand its text back to the
// model as the tool result so it can correct itself.
func (t *Tool[T]) Decode(call ToolCall) (T, error) {
	var zero T
	if call.Name != t.spec.Name {
		return zero, fmt.Errorf("%w: call of tool %q decoded as %q", ErrInvalidArguments, call.Name, t.spec.Name)
	}
	args := bytes.TrimSpace(call.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	// Some models send the arguments object as a JSON string.
	if args[0] == '"' {
		var inner string
		if err := json.Unmarshal(args, &inner); err == nil && strings.HasPrefix(strings.TrimSpace(inner), "{") {
			args = []byte(inner)
		}
	}
	v, err := decodeWith[T](t.spec.Parameters, args)
	if err != nil {
		return zero, fmt.Errorf("%w: tool %q: %v", ErrInvalidArguments, t.spec.Name, err)
	}
	return v, nil
}

// parseContentToolCalls recognises a tool call that came back as plain
// content. Ollama's tool-call parser for JSON-style templates counts braces
// without skipping strings, so a call whose string argument contains "}" is
// returned as content. Accepted shapes, optionally inside <tool_call> tags or
// a ``` fence, one or more in sequence or in an array:
//
//	{"name": "t", "arguments": {...}}
//	{"name": "t", "parameters": {...}}
//	{"type": "function", "function": {"name": "t", "arguments": {...}}}
//
// Every call must name an offered tool, else nothing is recognised.
func parseContentToolCalls(content string, tools []ToolSpec) []ToolCall {
	if len(tools) == 0 {
		return nil
	}
	s := strings.TrimSpace(content)
	s = strings.ReplaceAll(s, "<tool_call>", "")
	s = strings.ReplaceAll(s, "</tool_call>", "")
	s = stripFence(strings.TrimSpace(s))
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil
	}
	offered := map[string]bool{}
	for _, t := range tools {
		offered[t.Name] = true
	}
	var calls []ToolCall
	dec := json.NewDecoder(strings.NewReader(s))
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil
		}
		var items []json.RawMessage
		if raw[0] == '[' {
			if json.Unmarshal(raw, &items) != nil {
				return nil
			}
		} else {
			items = []json.RawMessage{raw}
		}
		for _, it := range items {
			c, ok := parseOneCall(it)
			if !ok || !offered[c.Name] {
				return nil
			}
			calls = append(calls, c)
		}
	}
	return calls
}

func parseOneCall(raw json.RawMessage) (ToolCall, bool) {
	var obj struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
		Function   *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return ToolCall{}, false
	}
	c := ToolCall{Name: obj.Name, Arguments: obj.Arguments}
	if c.Arguments == nil {
		c.Arguments = obj.Parameters
	}
	if obj.Function != nil && c.Name == "" {
		c.Name, c.Arguments = obj.Function.Name, obj.Function.Arguments
	}
	if c.Name == "" {
		return ToolCall{}, false
	}
	if c.Arguments == nil {
		c.Arguments = json.RawMessage("{}")
	}
	return c, true
}
