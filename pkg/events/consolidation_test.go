package events_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/events"
)

func TestConsolidationDoneRejectsNegativeCounts(t *testing.T) {
	e := events.New(events.Ref{ProjectID: "p", SessionID: "s"}, events.ConsolidationDone{Steps: 3, Stored: -1, PromptTokens: -5})
	_, err := events.Encode(e)
	if !errors.Is(err, events.ErrInvalidEvent) || !strings.Contains(err.Error(), "stored") || !strings.Contains(err.Error(), "prompt_tokens") {
		t.Fatalf("error %v, want both negative fields named", err)
	}
}
