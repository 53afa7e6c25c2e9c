package events_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/engram-memory/engram/pkg/events"
)

// FuzzDecode: Decode never panics, every failure wraps ErrInvalidEvent, and
// what decodes re-encodes to an event that decodes to the same value.
func FuzzDecode(f *testing.F) {
	for _, e := range samples() {
		b, err := events.Encode(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{``, `{}`, `null`, `[]`, `{"type":"turn_started","payload":{}}`,
		`{"id":"a","type":"turn_ended","version":1,"occurred_at":"2026-01-01T00:00:00Z","project_id":"p","session_id":"s","turn_id":"t","payload":{"messages":[{"role":"tool"}]}}`,
		"{\"id\":\"a\xff\"}", `{"id":"\ud800"}`, `{"id":"\ud83d\ude00"}`,
		`{"id":"a","type":"memory_changed","version":1,"occurred_at":"2026-01-01T00:00:00Z","project_id":"p","payload":{"changes":[{"id":"n","kind":"created"}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := events.Decode(data)
		if err != nil {
			if !errors.Is(err, events.ErrInvalidEvent) {
				t.Fatalf("error %v does not wrap ErrInvalidEvent", err)
			}
			return
		}
		b, err := events.Encode(e)
		if err != nil {
			t.Fatalf("decoded event does not encode: %v", err)
		}
		e2, err := events.Decode(b)
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v\n%s", err, b)
		}
		if !e2.OccurredAt.Equal(e.OccurredAt) {
			t.Fatalf("occurred_at changed: %v -> %v", e.OccurredAt, e2.OccurredAt)
		}
		e2.OccurredAt = e.OccurredAt
		if !reflect.DeepEqual(normal(e), normal(e2)) {
			t.Fatalf("round trip changed the event\n%#v\n%#v", e, e2)
		}
	})
}

// normal clears representation-only differences (time zones inside
// payloads, nil vs empty) by re-encoding through JSON text.
func normal(e events.Envelope) string {
	b, _ := events.Encode(e)
	return string(b)
}
