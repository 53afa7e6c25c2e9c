package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

type fact struct {
	Subject string   `json:"subject" llm:"maxLength=40"`
	Kind    string   `json:"kind" llm:"enum=decision|preference"`
	Tags    []string `json:"tags" llm:"maxItems=3,maxLength=16"`
	Weight  float64  `json:"weight" llm:"minimum=0,maximum=1"`
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return c
}

func req(msgs ...string) llm.Request {
	r := llm.Request{Role: llm.RoleExtract, Project: "p1"}
	for _, m := range msgs {
		r.Messages = append(r.Messages, llm.User(m))
	}
	return r
}

// The format and num_predict sent are exactly what Ollama's structured
// outputs documentation shows: a JSON Schema object in "format", options in
// "options", stream false, keep_alive as a duration string.
func TestStructuredSendsDocumentedJSON(t *testing.T) {
	srv := llmtest.New(t)
	want := fact{Subject: "deploys", Kind: "decision", Tags: []string{"ci"}, Weight: 0.5}
	srv.Enqueue(llmtest.JSON(want).Tokens(120, 30))
	temp := 0.2
	r := req("remember this")
	r.Temperature = &temp
	got, resp, err := llm.Structured[fact](ctx(t), srv.Client(), r)
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != want.Subject || got.Kind != want.Kind || len(got.Tags) != 1 || got.Weight != 0.5 {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
	if resp.PromptTokens != 120 || resp.CompletionTokens != 30 || resp.Estimated {
		t.Fatalf("tokens %d/%d estimated=%v, want Ollama's 120/30", resp.PromptTokens, resp.CompletionTokens, resp.Estimated)
	}
	body := srv.Chats()[0].Body
	var sent map[string]json.RawMessage
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	s, _ := llm.SchemaFor[fact]()
	wantFormat := `{"type":"object","properties":{"subject":{"type":"string","maxLength":40},` +
		`"kind":{"type":"string","enum":["decision","preference"],"maxLength":10},` +
		`"tags":{"type":"array","items":{"type":"string","maxLength":16},"maxItems":3},` +
		`"weight":{"type":"number","minimum":0,"maximum":1}},"required":["subject","kind","tags","weight"],"additionalProperties":false}`
	checks := map[string]string{
		"model":      `"llmtest-chat"`,
		"stream":     `false`,
		"keep_alive": `"10m0s"`,
		"messages":   `[{"role":"user","content":"remember this"}]`,
		"format":     wantFormat,
		"options":    `{"num_ctx":` + itoa(llmtest.DefaultContextLength) + `,"num_predict":` + itoa(s.PredictTokens()) + `,"temperature":0.2}`,
		"truncate":   `false`,
		"shift":      `false`,
	}
	for k, v := range checks {
		if string(sent[k]) != v {
			t.Errorf("request %s = %s, want %s", k, sent[k], v)
		}
	}
	if _, ok := sent["tools"]; ok {
		t.Errorf("structured request carries tools: %s", sent["tools"])
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestStructuredRepair(t *testing.T) {
	cases := []struct {
		name    string
		bad     llmtest.Reply
		problem string
	}{
		{"not json", llmtest.Text(`{"subject": "x", `), "not valid JSON"},
		{"schema violation", llmtest.JSON(map[string]any{"subject": strings.Repeat("s", 41), "kind": "decision", "tags": []string{}, "weight": 0}),
			`field "subject": is 41 characters long, at most 40 allowed`},
		{"unknown field", llmtest.JSON(map[string]any{"subject": "s", "kind": "decision", "tags": []string{}, "weight": 0, "extra": 1}),
			`field "extra": is not an allowed field`},
		{"missing field", llmtest.JSON(map[string]any{"subject": "s", "tags": []string{}, "weight": 0}), `field "kind": is required but missing`},
		{"cut off", llmtest.Truncated(`{"subject": "aaaaaaaa`), "cut off at the token limit"},
		{"prose", llmtest.Text("Sure! Here is the JSON you asked for."), "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Enqueue(c.bad.Tokens(10, 5), llmtest.Example().Tokens(12, 6))
			got, resp, err := llm.Structured[fact](ctx(t), srv.Client(), req("q"))
			if err != nil {
				t.Fatalf("after repair: %v", err)
			}
			if got.Kind != "decision" {
				t.Fatalf("decoded %+v from the example reply", got)
			}
			if resp.PromptTokens != 22 || resp.CompletionTokens != 11 {
				t.Fatalf("tokens of both attempts = %d/%d, want 22/11", resp.PromptTokens, resp.CompletionTokens)
			}
			reqs := srv.ChatRequests()
			if len(reqs) != 2 {
				t.Fatalf("%d chat calls, want 2", len(reqs))
			}
			msgs := reqs[1].Messages
			if len(msgs) != 3 || msgs[1].Role != "assistant" || msgs[2].Role != "user" {
				t.Fatalf("repair messages = %+v", msgs)
			}
			if !strings.Contains(msgs[2].Content, c.problem) {
				t.Fatalf("repair prompt %q does not say %q", msgs[2].Content, c.problem)
			}
			if len(reqs[1].Format) == 0 {
				t.Fatal("repair request lost the format")
			}
		})
	}
}

func TestStructuredMisbehavedAfterRepair(t *testing.T) {
	srv := llmtest.New(t)
	srv.Enqueue(llmtest.Text("nope"), llmtest.Truncated(`{"subject":`))
	_, _, err := llm.Structured[fact](ctx(t), srv.Client(), req("q"))
	if !errors.Is(err, llm.ErrMisbehaved) {
		t.Fatalf("err = %v, want ErrMisbehaved", err)
	}
	if !strings.Contains(err.Error(), "cut off") {
		t.Errorf("error %q does not say what was wrong the second time", err)
	}
	if llm.Classify(err) != llm.ClassTransient {
		t.Errorf("misbehaved classified %v, want transient", llm.Classify(err))
	}
	if n := srv.Calls("/api/chat"); n != 2 {
		t.Fatalf("%d chat calls, want exactly 2 (one repair)", n)
	}
}

func TestStructuredAcceptsFencedJSON(t *testing.T) {
	srv := llmtest.New(t)
	srv.Enqueue(llmtest.Text("```json\n{\"subject\":\"s\",\"kind\":\"preference\",\"tags\":[],\"weight\":1}\n```"))
	got, _, err := llm.Structured[fact](ctx(t), srv.Client(), req("q"))
	if err != nil || got.Kind != "preference" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestStructuredPassesChatErrorsThrough(t *testing.T) {
	srv := llmtest.New(t)
	srv.Enqueue(llmtest.InvalidSchema())
	_, _, err := llm.Structured[fact](ctx(t), srv.Client(), req("q"))
	if !errors.Is(err, llm.ErrInvalidRequest) {
		t.Fatalf("err = %v, want ErrInvalidRequest", err)
	}
	if n := srv.Calls("/api/chat"); n != 1 {
		t.Fatalf("%d calls: a request error must not be repaired", n)
	}
}

func TestStructuredRefusesUnboundedType(t *testing.T) {
	type loose struct {
		Body string `json:"body"`
	}
	srv := llmtest.New(t)
	_, _, err := llm.Structured[loose](ctx(t), srv.Client(), req("q"))
	if !errors.Is(err, llm.ErrInvalidRequest) || !strings.Contains(err.Error(), "maxLength") {
		t.Fatalf("err = %v", err)
	}
	if srv.Calls("/api/chat") != 0 {
		t.Fatal("an unbounded schema was sent")
	}
}

func TestDecodeStrict(t *testing.T) {
	if _, err := llm.Decode[fact]([]byte(`{"subject":"s","kind":"decision","tags":[],"weight":0.1}`)); err != nil {
		t.Fatal(err)
	}
	_, err := llm.Decode[fact]([]byte(`{"subject":"s","kind":"decision","tags":[],"weight":0.1,"x":1}`))
	if err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("unknown field: %v", err)
	}
}
