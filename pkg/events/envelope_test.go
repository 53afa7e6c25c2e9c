package events_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/events"
)

var ref = events.Ref{ProjectID: "acme/web", SessionID: "chat 42", TurnID: "t-1"}

// samples returns one valid event of every type.
func samples() []events.Envelope {
	at := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	return []events.Envelope{
		events.NewTurnStarted(ref, events.TurnStarted{Text: "how do we deploy?", Paths: []string{"deploy/k8s"},
			ProjectNames: map[string]string{"acme/web": "Acme Web"}, ReplyTo: "_INBOX.abc", ReplyBy: at}),
		events.NewTurnEnded(ref, events.TurnEnded{Messages: []events.Message{
			{Role: events.RoleUser, Content: "deploy it"},
			{Role: events.RoleAssistant, Content: "running", ToolCalls: []events.ToolCall{{ID: "c1", Name: "shell", Arguments: `{"cmd":"make deploy"}`}}},
			{Role: events.RoleTool, ToolName: "shell", ToolCallID: "c1", ToolStatus: events.ToolFailed, Content: "exit 2"},
		}, ChangedPaths: []string{"Makefile"}, InputTokens: 1200}),
		events.NewSessionIdle(events.Ref{ProjectID: "p", SessionID: "s"}, events.SessionIdle{LastActivity: at}),
		events.NewTokensReported(events.Ref{ProjectID: "p", SessionID: "s"}, events.TokensReported{StackID: "sub-1", InputTokens: 90000, ContextWindow: 128000, Ephemeral: true}),
		events.New(ref, events.InjectionReady{InReplyTo: "01X", Block: "<memory>...</memory>", NodeIDs: []string{"n1", "n2"}, Scores: []float64{0, 0.031}}),
		events.New(events.Ref{ProjectID: "p"}, events.MemoryChanged{Changes: []events.Change{{ID: "n1", Kind: events.ChangeCreated}}, Cause: "01Y"}),
		events.New(events.Ref{ProjectID: "p", SessionID: "s"}, events.ConsolidationDone{UpTo: 42, Steps: 7, Changed: []string{"n1"}, Reason: "done",
			Pass: "pass1", Stored: 2, Revised: 1, Forgotten: 1, Linked: 1, Duplicates: 1, Held: 1, PromptTokens: 4100, CompletionTokens: 80}),
		events.New(events.Ref{ProjectID: "p", SessionID: "s"}, events.CompactionDone{StackID: "main", UpTo: 40, TokensBefore: 90000, TokensAfter: 20000}),
	}
}

func TestRoundTripEveryType(t *testing.T) {
	seen := map[events.Type]bool{}
	for _, e := range samples() {
		b, err := events.Encode(e)
		if err != nil {
			t.Fatalf("%s: encode: %v", e.Type, err)
		}
		got, err := events.Decode(b)
		if err != nil {
			t.Fatalf("%s: decode: %v\n%s", e.Type, err, b)
		}
		if !got.OccurredAt.Equal(e.OccurredAt) {
			t.Errorf("%s: occurred_at %v, want %v", e.Type, got.OccurredAt, e.OccurredAt)
		}
		got.OccurredAt = e.OccurredAt
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%s: round trip\n got %#v\nwant %#v", e.Type, got, e)
		}
		seen[e.Type] = true
	}
	for _, ty := range append(append([]events.Type{}, events.InputTypes...), events.OutputTypes...) {
		if !seen[ty] {
			t.Errorf("no sample of %s", ty)
		}
	}
}

func TestNewFillsIDVersionTime(t *testing.T) {
	before := time.Now()
	a := events.NewSessionIdle(events.Ref{ProjectID: "p", SessionID: "s"}, events.SessionIdle{LastActivity: before})
	b := events.NewSessionIdle(events.Ref{ProjectID: "p", SessionID: "s"}, events.SessionIdle{LastActivity: before})
	if a.ID == "" || a.ID == b.ID || len(a.ID) != 26 {
		t.Fatalf("ids %q %q: want unique 26-char ids", a.ID, b.ID)
	}
	if a.Version != events.SchemaVersion || a.Type != events.TypeSessionIdle {
		t.Fatalf("version %d type %s", a.Version, a.Type)
	}
	if a.OccurredAt.Before(before.Add(-time.Second)) || a.OccurredAt.Location() != time.UTC {
		t.Fatalf("occurred_at %v", a.OccurredAt)
	}
	// ids are time ordered at millisecond granularity
	time.Sleep(2 * time.Millisecond)
	c := events.NewID()
	if c <= a.ID {
		t.Fatalf("id %q not after %q", c, a.ID)
	}
}

func TestIDsUnique(t *testing.T) {
	seen := make(map[string]bool, 10000)
	for range 10000 {
		id := events.NewID()
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
}

// fieldsOf returns the fields named by err's FieldErrors.
func fieldsOf(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		var fe *events.FieldError
		if x, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range x.Unwrap() {
				walk(c)
			}
			return
		}
		if errors.As(e, &fe) {
			out = append(out, fe.Field)
		}
	}
	walk(err)
	return out
}

func TestDecodeNamesTheMissingField(t *testing.T) {
	valid := func() map[string]any {
		return map[string]any{
			"id": "01ABC", "type": "turn_ended", "version": 1, "occurred_at": "2026-11-29T19:00:00Z",
			"project_id": "p", "session_id": "s", "turn_id": "t",
			"payload": map[string]any{"messages": []any{
				map[string]any{"role": "user", "content": "hi"},
				map[string]any{"role": "tool", "tool_status": "ok", "content": "x"},
			}},
		}
	}
	cases := []struct {
		name  string
		edit  func(m map[string]any)
		field string
	}{
		{"id", func(m map[string]any) { delete(m, "id") }, "id"},
		{"type", func(m map[string]any) { delete(m, "type") }, "type"},
		{"unknown type", func(m map[string]any) { m["type"] = "turn_exploded" }, "type"},
		{"version", func(m map[string]any) { delete(m, "version") }, "version"},
		{"newer version", func(m map[string]any) { m["version"] = 99 }, "version"},
		{"occurred_at", func(m map[string]any) { delete(m, "occurred_at") }, "occurred_at"},
		{"project", func(m map[string]any) { m["project_id"] = "" }, "project_id"},
		{"session", func(m map[string]any) { delete(m, "session_id") }, "session_id"},
		{"turn", func(m map[string]any) { delete(m, "turn_id") }, "turn_id"},
		{"long id", func(m map[string]any) { m["session_id"] = strings.Repeat("x", events.MaxIDLen+1) }, "session_id"},
		{"bad time", func(m map[string]any) { m["occurred_at"] = "yesterday" }, "occurred_at"},
		{"version as string", func(m map[string]any) { m["version"] = "1" }, "version"},
		{"project as number", func(m map[string]any) { m["project_id"] = 7 }, "project_id"},
		{"payload", func(m map[string]any) { delete(m, "payload") }, "payload"},
		{"payload array", func(m map[string]any) { m["payload"] = []int{1} }, "payload"},
		{"messages", func(m map[string]any) { m["payload"] = map[string]any{} }, "payload.messages"},
		{"role", func(m map[string]any) {
			m["payload"].(map[string]any)["messages"].([]any)[1].(map[string]any)["role"] = "robot"
		}, "payload.messages[1].role"},
		{"tool status", func(m map[string]any) {
			delete(m["payload"].(map[string]any)["messages"].([]any)[1].(map[string]any), "tool_status")
		}, "payload.messages[1].tool_status"},
		{"payload wrong shape", func(m map[string]any) { m["payload"] = map[string]any{"messages": "nope"} }, "payload"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := valid()
			c.edit(m)
			b, _ := json.Marshal(m)
			_, err := events.Decode(b)
			if !errors.Is(err, events.ErrInvalidEvent) {
				t.Fatalf("err %v: want ErrInvalidEvent", err)
			}
			fields := fieldsOf(err)
			found := false
			for _, f := range fields {
				found = found || f == c.field
			}
			if !found {
				t.Fatalf("err %q names %v, want %q", err, fields, c.field)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Fatalf("message %q does not name %q", err, c.field)
			}
		})
	}
	// The valid base decodes.
	b, _ := json.Marshal(valid())
	if _, err := events.Decode(b); err != nil {
		t.Fatalf("valid event: %v", err)
	}
}

func TestDecodeReportsEveryProblem(t *testing.T) {
	_, err := events.Decode([]byte(`{"type":"tokens_reported","payload":{"input_tokens":-1}}`))
	got := fieldsOf(err)
	for _, want := range []string{"id", "version", "occurred_at", "project_id", "session_id", "payload.input_tokens"} {
		if !contains(got, want) {
			t.Errorf("fields %v lack %q", got, want)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestDecodeMalformed(t *testing.T) {
	for _, in := range []string{``, `{`, `[]`, `"x"`, `{"id":5}`, `null`} {
		if _, err := events.Decode([]byte(in)); !errors.Is(err, events.ErrInvalidEvent) {
			t.Errorf("%q: err %v, want ErrInvalidEvent", in, err)
		}
	}
}

func TestDecodeToleratesUnknownFields(t *testing.T) {
	in := `{"id":"01A","type":"session_idle","version":1,"occurred_at":"2026-11-29T19:00:00Z",
		"project_id":"p","session_id":"s","future":{"x":1},
		"payload":{"last_activity":"2026-11-29T18:00:00Z","mood":"sleepy"}}`
	e, err := events.Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	p, err := events.PayloadAs[events.SessionIdle](e)
	if err != nil {
		t.Fatal(err)
	}
	if !p.LastActivity.Equal(time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)) {
		t.Fatalf("last activity %v", p.LastActivity)
	}
	if _, err := events.PayloadAs[events.TurnEnded](e); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("PayloadAs wrong type: %v", err)
	}
}

func TestEncodeRejectsInvalid(t *testing.T) {
	e := events.NewTurnStarted(events.Ref{ProjectID: "p", SessionID: "s"}, events.TurnStarted{})
	_, err := events.Encode(e)
	got := fieldsOf(err)
	if !contains(got, "turn_id") || !contains(got, "payload.text") {
		t.Fatalf("fields %v: want turn_id and payload.text", got)
	}
	e = events.NewTurnStarted(ref, events.TurnStarted{Text: "x", ReplyTo: "bad subject.*"})
	if _, err := events.Encode(e); !contains(fieldsOf(err), "payload.reply_to") {
		t.Fatalf("reply_to: %v", err)
	}
	// a payload of another type than the envelope says
	e = events.NewTurnStarted(ref, events.TurnStarted{Text: "x"})
	e.Type = events.TypeTurnEnded
	if _, err := events.Encode(e); !contains(fieldsOf(err), "payload") {
		t.Fatalf("mismatch: %v", err)
	}
}

func TestEnvelopeUnmarshalJSON(t *testing.T) {
	e := samples()[1]
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var got events.Envelope
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Payload.(events.TurnEnded); !ok {
		t.Fatalf("payload %T", got.Payload)
	}
	if err := json.Unmarshal([]byte(`{"id":"x"}`), &got); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("err %v", err)
	}
}
