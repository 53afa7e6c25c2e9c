package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Decode checks data against the schema of T and decodes it strictly
// (unknown fields rejected). The error names every wrong field.
func Decode[T any](data []byte) (T, error) {
	var zero T
	s, err := SchemaFor[T]()
	if err != nil {
		return zero, err
	}
	return decodeWith[T](s, data)
}

func decodeWith[T any](s *Schema, data []byte) (T, error) {
	var v T
	if err := s.Validate(data); err != nil {
		return v, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, fmt.Errorf("does not fit the expected shape: %v", err)
	}
	return v, nil
}

// Structured sends req with the JSON Schema of T as its Format and decodes the
// reply into a T. When MaxTokens is zero it is set from the schema, so a
// valid reply always fits. An invalid reply (not JSON, a schema violation, or
// cut off at the token limit) gets one repair attempt in which the model is
// told what was wrong; if that fails too the error wraps ErrMisbehaved.
// Errors from c.Chat are returned as they are. Tools in req are dropped.
//
// The returned Response is the last one, with the tokens and latency of both
// attempts added up.
func Structured[T any](ctx context.Context, c Chatter, req Request) (T, Response, error) {
	var zero T
	s, err := SchemaFor[T]()
	if err != nil {
		return zero, Response{}, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	req.Format = s
	if req.MaxTokens == 0 {
		req.MaxTokens = s.PredictTokens()
	}
	req.Tools = nil
	var total Response
	for attempt := 0; ; attempt++ {
		resp, err := c.Chat(ctx, req)
		total = addUp(total, resp)
		if err != nil {
			return zero, total, err
		}
		v, problem := decodeReply[T](s, resp)
		if problem == nil {
			return v, total, nil
		}
		if attempt >= 1 {
			return zero, total, fmt.Errorf("%w: %s reply for %s after a repair attempt: %v",
				ErrMisbehaved, req.Role, reflect.TypeFor[T](), problem)
		}
		req.Messages = append(slices.Clip(req.Messages),
			Assistant(truncate(resp.Message.Content, 4000)),
			User(repairPrompt(problem)))
	}
}

func decodeReply[T any](s *Schema, resp Response) (T, error) {
	var zero T
	if resp.DoneReason == "length" {
		return zero, fmt.Errorf("the reply was cut off at the token limit before the JSON was complete")
	}
	content := strings.TrimSpace(resp.Message.Content)
	content = stripFence(content)
	return decodeWith[T](s, []byte(content))
}

// stripFence removes a ```json ... ``` fence some models wrap JSON in.
func stripFence(s string) string {
	if !strings.HasPrefix(s, "```") {
		return s
	}
	s = strings.TrimPrefix(s, "```")
	if i := strings.IndexByte(s, '\n'); i >= 0 && !strings.Contains(s[:i], "{") {
		s = s[i+1:]
	}
	s = strings.TrimSpace(s)
	return strings.TrimSpace(strings.TrimSuffix(s, "```"))
}

func repairPrompt(problem error) string {
	return "Your previous reply could not be used: " + problem.Error() +
		". Reply again with only one JSON object that follows the required schema exactly: " +
		"every required field present, no other fields, and strings and lists within their limits."
}

func addUp(total, r Response) Response {
	r.PromptTokens += total.PromptTokens
	r.CompletionTokens += total.CompletionTokens
	r.Estimated = r.Estimated || total.Estimated
	r.Latency += total.Latency
	return r
}

// SchemaEntry is one registered production schema.
type SchemaEntry struct {
	// Name is unique, e.g. "extract.memories" or "tool.consolidate.remember".
	Name string
	// Kind is "format" (structured output) or "tool" (tool parameters).
	Kind string
	// Type is the Go type the schema was built from (nil for tools).
	Type   reflect.Type
	Schema *Schema
	// Tool is the tool's spec, for Kind "tool".
	Tool *ToolSpec
}

var registry struct {
	sync.Mutex
	entries map[string]SchemaEntry
}

// RegisterSchema builds the schema of T, records it under name as a "format"
// schema and returns it. Workers register every type they pass to
// [Structured], so the real-Ollama suite can send each one to a real model
// ([Schemas]). It panics on an invalid type or a name registered with a
// different schema: call it from a package-level var.
func RegisterSchema[T any](name string) *Schema {
	s, err := SchemaFor[T]()
	if err != nil {
		panic(err)
	}
	register(SchemaEntry{Name: name, Kind: "format", Type: reflect.TypeFor[T](), Schema: s})
	return s
}

// RegisterTool records a tool's parameter schema under "tool."+name.
func RegisterTool(spec ToolSpec) {
	register(SchemaEntry{Name: "tool." + spec.Name, Kind: "tool", Schema: spec.Parameters, Tool: &spec})
}

func register(e SchemaEntry) {
	registry.Lock()
	defer registry.Unlock()
	if registry.entries == nil {
		registry.entries = map[string]SchemaEntry{}
	}
	if old, ok := registry.entries[e.Name]; ok {
		if old.Schema.String() != e.Schema.String() {
			panic(fmt.Sprintf("llm: schema %q registered twice with different schemas", e.Name))
		}
		return
	}
	registry.entries[e.Name] = e
}

// Schemas returns every registered schema, sorted by name.
func Schemas() []SchemaEntry {
	registry.Lock()
	defer registry.Unlock()
	out := make([]SchemaEntry, 0, len(registry.entries))
	for _, e := range registry.entries {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b SchemaEntry) int { return strings.Compare(a.Name, b.Name) })
	return out
}
