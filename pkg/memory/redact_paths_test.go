package memory

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory/redacttest"
)

// The corpus through the write paths that store text: a node's label and
// body (PrepareNew: the extractor's, the consolidator's and import's
// writes) and a transcript's messages (PrepareMessages: user and assistant
// content, tool results, and tool-call arguments, which are JSON whose
// strings hold the secret escaped). No secret survives, and arguments stay
// valid JSON.
func TestSecretCorpusThroughWritePaths(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	total, caught := 0, 0
	for _, c := range redacttest.Cases(23, 2026, 2) {
		ctxText := c.Context()
		secret := c.Secret
		check := func(where, out, context string) {
			total++
			if w := redacttest.Survives(secret, context, out); w != "" {
				t.Errorf("%s: %s: %q survived:\n in  %q\n out %q", c.Kind, where, w, c.Text, out)
				return
			}
			caught++
		}
		n, err := PrepareNew(Node{Subkind: Observation, Scope: ScopeProject, ProjectID: "p", Label: c.Text, Body: "note: " + c.Text,
			Paths: []string{c.Text}, Entities: []Entity{{Name: c.Text}, {Key: c.Text, Name: "x"}}}, now)
		if err != nil {
			t.Fatalf("%s: PrepareNew: %v", c.Kind, err)
		}
		check("node label", n.Label, ctxText)
		check("node body", n.Body, "note: "+ctxText)
		var paths, ents strings.Builder
		for _, p := range n.Paths {
			paths.WriteString(p + "\n")
		}
		for _, e := range n.Entities {
			ents.WriteString(e.Key + "\n" + e.Name + "\n")
		}
		check("node paths", paths.String(), ctxText)
		secret = strings.ToLower(c.Secret) // keys are lower-cased names
		check("entity keys and names", strings.ToLower(ents.String()), strings.ToLower(ctxText+ctxText+"x"))
		secret = c.Secret

		args, _ := json.Marshal(map[string]any{"command": c.Text, "cwd": "/srv/app", "timeout": 30})
		argsCtx, _ := json.Marshal(map[string]any{"command": ctxText, "cwd": "/srv/app", "timeout": 30})
		msgs, err := PrepareMessages("t1", []Message{
			{Role: RoleUser, Content: c.Text},
			{Role: RoleAssistant, Content: "running it", ToolCalls: []ToolCall{{ID: "c1", Name: "shell", Arguments: string(args)}}},
			{Role: RoleTool, ToolName: "shell", ToolCallID: "c1", ToolStatus: ToolOK, Content: "$ " + c.Text + "\nok"},
		}, now)
		if err != nil {
			t.Fatalf("%s: PrepareMessages: %v", c.Kind, err)
		}
		check("user message", msgs[0].Content, ctxText)
		a := msgs[1].ToolCalls[0].Arguments
		check("tool-call arguments", a, string(argsCtx))
		if !json.Valid([]byte(a)) {
			t.Errorf("%s: tool-call arguments no longer JSON:\n in  %s\n out %s", c.Kind, args, a)
		}
		check("tool result", msgs[2].Content, "$ "+ctxText+"\nok")
	}
	t.Logf("write paths: caught %d/%d (node label, body, paths, entities; user message, tool-call arguments, tool result)", caught, total)
}
