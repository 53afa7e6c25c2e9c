package compact_test

import (
	"testing"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/pkg/memory"
)

// conv builds messages from a compact script: u user, a assistant, c an
// assistant with a tool call (id = its index), t the tool result of the
// latest call.
func conv(script string) []memory.Message {
	var out []memory.Message
	lastCall := ""
	for i, r := range script {
		m := memory.Message{ID: int64(i + 1), TurnID: "t", Content: string(r)}
		switch r {
		case 'u':
			m.Role = memory.RoleUser
		case 'a':
			m.Role = memory.RoleAssistant
		case 'c':
			m.Role = memory.RoleAssistant
			lastCall = "call-" + string(rune('A'+i))
			m.ToolCalls = []memory.ToolCall{{ID: lastCall, Name: "bash", Arguments: `{"cmd":"ls"}`}}
		case 't':
			m.Role, m.ToolCallID, m.ToolName, m.ToolStatus = memory.RoleTool, lastCall, "bash", memory.ToolOK
		}
		out = append(out, m)
	}
	return out
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		keep   int
		want   int
	}{
		{"no more than keep-recent", "uauaua", 6, 0},
		{"fewer than keep-recent", "ua", 6, 0},
		{"boundary at a user message", "uauauaua", 6, 2},
		{"walk back to the nearest user message", "uaaaauaua", 4, 5},
		{"walk back past assistant messages", "uauaaaaaa", 6, 2},
		{"first message guard", "uaaaaaaa", 6, 0},
		{"only the first user message", "uctctctctct", 2, 0},
		{"keep-recent 0 keeps the last turn", "uaua", 0, 2},
		{"tool results stay after their calls", "uauctctua", 4, 2},
		// A user message between a call and its result (an interruption):
		// the boundary moves before the assistant that made the call.
		{"pairing moves the boundary", "uauacutua", 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := conv(tc.script)
			got := compact.Split(msgs, tc.keep)
			if got != tc.want {
				t.Fatalf("Split(%s, %d) = %d, want %d", tc.script, tc.keep, got, tc.want)
			}
			if got == 0 {
				return
			}
			// Never separates a call from its result.
			calls := map[string]bool{}
			for _, m := range msgs[:got] {
				for _, c := range m.ToolCalls {
					calls[c.ID] = true
				}
			}
			for _, m := range msgs[got:] {
				if m.Role == memory.RoleTool && calls[m.ToolCallID] {
					t.Fatalf("result of %s kept after the boundary %d, its call summarised", m.ToolCallID, got)
				}
			}
		})
	}
}

func TestSplitResultWithoutID(t *testing.T) {
	// A result without a call id right at the boundary belongs to the
	// assistant message before it.
	msgs := conv("uauact")
	msgs[5].ToolCallID = ""
	msgs[4].ToolCalls[0].ID = ""
	msgs = append(msgs, memory.Message{ID: 7, Role: memory.RoleUser, Content: "u"})
	// keep 2: b = 5 walks back to the user message at 2; nothing to move.
	if got := compact.Split(msgs, 2); got != 2 {
		t.Fatalf("Split = %d, want 2", got)
	}
	// A user message inserted between the call and its id-less result.
	msgs = []memory.Message{
		{ID: 1, Role: memory.RoleUser}, {ID: 2, Role: memory.RoleAssistant},
		{ID: 3, Role: memory.RoleUser}, {ID: 4, Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{Name: "bash"}}},
		{ID: 5, Role: memory.RoleUser}, {ID: 6, Role: memory.RoleTool, ToolStatus: memory.ToolOK},
		{ID: 7, Role: memory.RoleAssistant},
	}
	if got := compact.Split(msgs, 3); got != 3 {
		// b = 4 (the user message at index 4) would keep the id-less
		// result of the call at 3 without its call: it moves to 3.
		t.Fatalf("Split = %d, want 3", got)
	}
}
