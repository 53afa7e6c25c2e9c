package llm

import (
	"encoding/json"
	"errors"
	"testing"
)

type fuzzArgs struct {
	Label string    `json:"label" llm:"maxLength=40,minLength=1"`
	Kind  string    `json:"kind" llm:"enum=decision|preference|failure"`
	Tags  []string  `json:"tags,omitempty" llm:"maxItems=3,maxLength=16"`
	Conf  float64   `json:"confidence" llm:"minimum=0,maximum=1,optional"`
	Count int       `json:"count" llm:"minimum=0,maximum=100,optional"`
	Items []fuzzSub `json:"items,omitempty" llm:"maxItems=2"`
}

type fuzzSub struct {
	ID   uint8  `json:"id"`
	Note string `json:"note" llm:"maxLength=8"`
}

var fuzzTool = MustTool[fuzzArgs]("remember", "store")

func fuzzSeeds(f *testing.F) {
	for _, s := range []string{
		`{"label":"x","kind":"decision"}`,
		`{"label":"x","kind":"failure","tags":["a","b"],"confidence":0.5,"count":3,"items":[{"id":1,"note":"n"}]}`,
		`"{\"label\":\"x\",\"kind\":\"decision\"}"`,
		`{"label":"","kind":"decision"}`,
		`{"label":"x","kind":"decision","items":[{"id":256,"note":"n"}]}`,
		`{"label":"x","kind":"decision","count":1e400}`,
		`{"label":"x","kind":"decision","count":-0}`,
		`{"label":"x","kind":"decision","extra":null}`,
		`null`, `[]`, `{`, ``, `"str"`, `{"label":"\ud800","kind":"decision"}`,
	} {
		f.Add([]byte(s))
	}
}

// Decoding tool arguments never panics; whatever it accepts fits the schema
// and every error wraps ErrInvalidArguments.
func FuzzToolDecode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := fuzzTool.Decode(ToolCall{Name: "remember", Arguments: data})
		if err != nil {
			if !errors.Is(err, ErrInvalidArguments) {
				t.Fatalf("error %v does not wrap ErrInvalidArguments", err)
			}
			return
		}
		b, _ := json.Marshal(v)
		if err := fuzzTool.Spec().Parameters.Validate(b); err != nil {
			t.Fatalf("accepted %q but its value %s fails the schema: %v", data, b, err)
		}
	})
}

// The structured decoder never panics, and what it accepts validates.
func FuzzStructuredDecode(f *testing.F) {
	fuzzSeeds(f)
	s, _ := SchemaFor[fuzzArgs]()
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := decodeReply[fuzzArgs](s, Response{Message: Message{Content: string(data)}})
		if err != nil {
			return
		}
		b, _ := json.Marshal(v)
		if err := s.Validate(b); err != nil {
			t.Fatalf("accepted %q but %s fails the schema: %v", data, b, err)
		}
	})
}

// Recognising tool calls in content never panics and only yields calls of
// offered tools with JSON arguments.
func FuzzContentToolCalls(f *testing.F) {
	for _, s := range []string{
		`{"name":"remember","arguments":{"label":"}","kind":"decision"}}`,
		`<tool_call>{"name":"recall","parameters":{"query":"q"}}</tool_call>`,
		`[{"name":"recall","arguments":{}},{"type":"function","function":{"name":"remember","arguments":{}}}]`,
		"```json\n{\"name\":\"recall\",\"arguments\":{}}\n```",
		`{"name":"forget"}`, `plain text`, `{`, `[`, `{"name":1}`,
	} {
		f.Add(s)
	}
	tools := []ToolSpec{fuzzTool.Spec(), {Name: "recall", Parameters: &Schema{Type: "object"}}}
	f.Fuzz(func(t *testing.T, content string) {
		for _, c := range parseContentToolCalls(content, tools) {
			if c.Name != "remember" && c.Name != "recall" {
				t.Fatalf("call of unoffered tool %q", c.Name)
			}
			if !json.Valid(c.Arguments) {
				t.Fatalf("arguments %q are not JSON", c.Arguments)
			}
		}
	})
}
