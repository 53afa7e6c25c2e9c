package extract

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// FuzzReply decodes model replies and checks that every proposal that gets
// through becomes a node within the clamps.
func FuzzReply(f *testing.F) {
	f.Add(`{"verdicts":[],"memories":[]}`)
	f.Add(`{"verdicts":[{"id":"abc","verdict":"used"}],"memories":[{"subkind":"preference","scope":"global","reach":"anywhere","asserted_by":"user","label":"Always answer in Indonesian.","body":"","confidence":0.95,"paths":[],"entities":["Indonesian"],"relations":[]}]}`)
	f.Add(`{"verdicts":[],"memories":[{"subkind":"observation","scope":"session","reach":"anywhere","asserted_by":"inferred","label":"token=sk-abcdefghijklmnopqrstuvwxyz","body":"x","confidence":0,"paths":["./a.go"],"entities":[],"relations":[{"id":"x","relation":"same"}]}]}`)
	f.Add(`not json`)
	f.Add(`{"memories":[{}]}`)
	ref := memory.SessionRef{Project: "p", Session: "s"}
	f.Fuzz(func(t *testing.T, data string) {
		r, err := llm.Decode[Reply]([]byte(data))
		if err != nil {
			return
		}
		for _, m := range r.Memories {
			n, ok := toNode(m, ref, true)
			if !ok {
				continue
			}
			if n.Confidence < MinConfidence || n.Confidence > 1 {
				t.Fatalf("confidence %v outside [0.1, 1]", n.Confidence)
			}
			if utf8.RuneCountInString(n.Label) > MaxLabelChars || utf8.RuneCountInString(n.Body) > MaxBodyChars {
				t.Fatalf("label or body over its cap")
			}
			if len(n.Entities) > memory.MaxEntities || len(n.Paths) > MaxReplyPaths {
				t.Fatalf("%d entities, %d paths", len(n.Entities), len(n.Paths))
			}
			if n.Scope == memory.ScopeGlobal && n.ProjectID != "" {
				t.Fatal("global memory with a project")
			}
			if n.Scope == memory.ScopeSession && n.Reach != memory.ReachHere {
				t.Fatal("session memory with reach anywhere")
			}
			if !n.Subkind.Valid() || !n.Scope.Valid() || !n.Reach.Valid() || !n.AssertedBy.Valid() {
				t.Fatalf("invalid node %+v", n)
			}
			if _, err := memory.PrepareNew(n, n.CreatedAt); err != nil {
				t.Fatalf("a clamped proposal is not a valid node: %v", err)
			}
		}
	})
}

// FuzzRender renders arbitrary messages and checks the cap.
func FuzzRender(f *testing.F) {
	f.Add("hello", "I will do it", "boom", 1)
	f.Add(strings.Repeat("x", 3000), strings.Repeat("y\n", 1500), "password=hunter22", 3)
	cfg := Defaults()
	cfg.TranscriptChars = 2000
	f.Fuzz(func(t *testing.T, user, assistant, tool string, reps int) {
		reps = max(1, min(reps, 8))
		var msgs []memory.Message
		for range reps {
			msgs = append(msgs,
				memory.Message{Role: memory.RoleUser, Content: user},
				memory.Message{Role: memory.RoleAssistant, Content: assistant, ToolCalls: []memory.ToolCall{{Name: tool}}},
				memory.Message{Role: memory.RoleTool, ToolName: tool, ToolStatus: memory.ToolFailed, Content: tool})
		}
		out := Render(msgs, cfg)
		if n := utf8.RuneCountInString(out); n > cfg.TranscriptChars {
			t.Fatalf("transcript of %d characters, cap %d", n, cfg.TranscriptChars)
		}
		if strings.Contains(out, "hunter22") {
			t.Fatal("secret rendered")
		}
	})
}

func TestRenderKeepsTail(t *testing.T) {
	cfg := Defaults()
	var msgs []memory.Message
	for i := range 400 {
		msgs = append(msgs, memory.Message{Role: memory.RoleUser, Content: strings.Repeat("m", 90) + " " + string(rune('a'+i%26))})
	}
	msgs = append(msgs, memory.Message{Role: memory.RoleUser, Content: "THE LAST MESSAGE"})
	out := Render(msgs, cfg)
	if n := utf8.RuneCountInString(out); n > 24000 || n < 23000 {
		t.Fatalf("rendered %d characters, want just under 24,000", n)
	}
	if !strings.HasPrefix(out, omitted+"USER: ") || !strings.HasSuffix(out, "USER: THE LAST MESSAGE") {
		t.Fatalf("tail not kept at a line start: %q ... %q", out[:60], out[len(out)-40:])
	}
}
