package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/events"
)

func TestReadEvents(t *testing.T) {
	evs, err := readEvents(strings.NewReader(`
{"type":"tokens_reported","project_id":"p","session_id":"s","payload":{"input_tokens":5}}
{"id":"fixed-id","type":"turn_started","version":1,"occurred_at":"2026-01-02T03:04:05Z","project_id":"p","session_id":"s","turn_id":"t","payload":{"text":"hi"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].ID == "" || evs[0].Version != events.SchemaVersion || evs[0].OccurredAt.IsZero() ||
		evs[1].ID != "fixed-id" || evs[1].OccurredAt.Year() != 2026 {
		t.Fatalf("events %+v", evs)
	}
	evs, err = readEvents(strings.NewReader(`[{"type":"session_idle","project_id":"p","session_id":"s","payload":{"last_activity":"2026-01-02T03:04:05Z"}}]`))
	if err != nil || len(evs) != 1 || evs[0].Type != events.TypeSessionIdle {
		t.Fatalf("array: %v %+v", err, evs)
	}
	// Every invalid event is reported; an output type is refused.
	_, err = readEvents(strings.NewReader(`{"type":"turn_started","project_id":"p","payload":{}}
{"type":"memory_changed","project_id":"p","payload":{"changes":[{"id":"n1","kind":"created"}]}}
{"type":"nope","project_id":"p","session_id":"s","payload":{}}`))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"event 1", "session_id", "turn_id", "payload.text", "event 2", "output event", "event 3", "unknown event type"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := readEvents(strings.NewReader("  ")); !errors.Is(err, errUsage) {
		t.Errorf("empty input: %v", err)
	}
	if _, err := readEvents(strings.NewReader(`{"type":`)); err == nil {
		t.Error("truncated JSON accepted")
	}
}

// engram publish refuses events over the maximum size, all reported,
// before sending any.
func TestPublishChecksEventSize(t *testing.T) {
	big := strings.Repeat("a", 2000)
	evs, err := readEvents(strings.NewReader(`{"type":"turn_started","project_id":"p","session_id":"s","turn_id":"t","payload":{"text":"small"}}
{"type":"turn_started","project_id":"p","session_id":"s","turn_id":"t","payload":{"text":"` + big + `"}}
{"type":"turn_ended","project_id":"p","session_id":"s","turn_id":"t","payload":{"messages":[{"role":"user","content":"` + big + `"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	err = checkSizes(evs, 1500)
	if !errors.Is(err, events.ErrEventTooLarge) || strings.Contains(err.Error(), "event 1 ") ||
		!strings.Contains(err.Error(), "event 2 (turn_started)") || !strings.Contains(err.Error(), "event 3 (turn_ended)") ||
		!strings.Contains(err.Error(), "the maximum is 1500") {
		t.Fatalf("sizes: %v", err)
	}
	if err := checkSizes(evs, 4000); err != nil {
		t.Fatal(err)
	}
}

// FuzzReadEvents: the publish input decoder never panics, and what it
// accepts are valid input events that encode.
func FuzzReadEvents(f *testing.F) {
	for _, s := range []string{
		`{"type":"tokens_reported","project_id":"p","session_id":"s","payload":{"input_tokens":5}}`,
		`[{"type":"session_idle","project_id":"p","session_id":"s","payload":{"last_activity":"2026-01-02T03:04:05Z"}}]`,
		`{"type":"turn_ended","project_id":"p","session_id":"s","turn_id":"t","payload":{"messages":[{"role":"user","content":"x"}]}} {}`,
		`[1,2]`, `{"id":null}`, `"x"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		evs, err := readEvents(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, e := range evs {
			if !e.Type.IsInput() {
				t.Fatalf("accepted output event %s", e.Type)
			}
			if _, err := events.Encode(e); err != nil {
				t.Fatalf("accepted an event that does not encode: %v", err)
			}
		}
	})
}
