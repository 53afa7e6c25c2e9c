package extract_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redacttest"
)

// Issue 23: the extractor stores no secret. One turn carries every case of
// the secret corpus as a user message, as a tool call's JSON arguments and
// as a tool result, and the model echoes one back in a memory: the stored
// transcript, the stored memories and the prompt hold none of them, and
// the stored arguments are still JSON.
func TestStoredTranscriptRedactsTheSecretCorpus(t *testing.T) {
	cases := redacttest.Cases(23, 2026, 2)
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		turn := extract.Turn{EventID: "ev-t1", Project: project, Session: session, Turn: "t1"}
		for _, c := range cases {
			args, _ := json.Marshal(map[string]any{"command": c.Text, "cwd": "/srv"})
			turn.Messages = append(turn.Messages,
				memory.Message{Role: memory.RoleUser, Content: "please run this: " + c.Text},
				memory.Message{Role: memory.RoleAssistant, Content: "running",
					ToolCalls: []memory.ToolCall{{ID: "c", Name: "shell", Arguments: string(args)}}},
				memory.Message{Role: memory.RoleTool, ToolName: "shell", ToolStatus: memory.ToolFailed, Content: "error near " + c.Text})
		}
		f.srv.Enqueue(reply(nil, rule("Deploy with: "+cases[0].Text, "project")))
		f.handle(turn)

		stored, err := f.st.Messages(f.ctx, ref(), 0, 10*len(turn.Messages))
		if err != nil {
			t.Fatal(err)
		}
		if len(stored) != len(turn.Messages) {
			t.Fatalf("%d messages stored, want %d", len(stored), len(turn.Messages))
		}
		var all strings.Builder
		for _, m := range stored {
			all.WriteString(m.Content + "\n")
			for _, tc := range m.ToolCalls {
				if !json.Valid([]byte(tc.Arguments)) {
					t.Errorf("stored tool-call arguments are not JSON: %s", tc.Arguments)
				}
				all.WriteString(tc.Arguments + "\n")
			}
		}
		echoed := false
		for _, n := range f.all() {
			all.WriteString(n.Label + "\n" + n.Body + "\n")
			echoed = echoed || strings.HasPrefix(n.Label, "Deploy with: ")
		}
		if !echoed || len(f.userMessages()) != 1 {
			t.Fatalf("the turn was not extracted (memory stored %v, %d extraction calls)", echoed, len(f.userMessages()))
		}
		for _, p := range f.userMessages() {
			all.WriteString(p + "\n")
		}
		var contexts strings.Builder
		for _, c := range cases {
			contexts.WriteString(c.Context() + "\n")
		}
		text, caught := all.String(), 0
		for _, c := range cases {
			if w := survivesIn(c.Secret, contexts.String(), text); w != "" {
				t.Errorf("%s: %q survived in the store or the prompt (from %q)", c.Kind, w, c.Text)
				continue
			}
			caught++
		}
		t.Logf("stored transcript, tool-call arguments, memories and prompt: caught %d/%d secrets", caught, len(cases))
	})
}

// survivesIn: a window of 8 of the secret counts when out holds it and no
// context of the corpus does (many cases share one text here).
func survivesIn(secret, contexts, out string) string {
	if strings.Contains(out, secret) {
		return secret
	}
	for i := 0; len(secret) >= 12 && i+8 <= len(secret); i++ {
		if w := secret[i : i+8]; strings.Contains(out, w) && !strings.Contains(contexts, w) {
			return w
		}
	}
	return ""
}
