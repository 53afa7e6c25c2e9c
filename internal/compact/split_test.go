package compact_test

import (
	"strings"
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

// perTurnIDs is a conversation of a platform that numbers tool calls per
// turn: every turn's call is "c1".
func perTurnIDs(turns int) []memory.Message {
	var out []memory.Message
	for i := range turns {
		out = append(out,
			memory.Message{Role: memory.RoleUser, Content: "do step " + string(rune('A'+i))},
			memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c1", Name: "bash", Arguments: `{"cmd":"make"}`}}},
			memory.Message{Role: memory.RoleTool, ToolName: "bash", ToolCallID: "c1", ToolStatus: memory.ToolOK, Content: "ok " + string(rune('A'+i))},
			memory.Message{Role: memory.RoleAssistant, Content: "done"})
	}
	for i := range out {
		out[i].ID = int64(i + 1)
	}
	return out
}

// Reused ids: results pair with the call of their own turn. Pairing by id
// alone paired every "c1" result with the first turn's call and moved the
// boundary to message 1 ("compacted up to message 1: 634 -> 796 tokens").
func TestSplitReusedToolCallIDs(t *testing.T) {
	msgs := perTurnIDs(3)
	if got := compact.Split(msgs, 6); got != 4 {
		t.Fatalf("Split = %d, want 4 (the second turn's user message)", got)
	}
	p := compact.Pair(msgs)
	for j, want := range map[int]int{2: 1, 6: 5, 10: 9} {
		if p.Caller[j] != want || p.Call[j] != 0 {
			t.Errorf("result %d pairs with message %d call %d, want %d call 0", j, p.Caller[j], p.Call[j], want)
		}
	}
	// The first turn's call was interrupted (no result): Render says so,
	// although a later turn's "c1" has one.
	msgs = append(msgs[:2:2], msgs[3:]...)
	out := compact.Render(msgs, compact.Defaults())
	if n := strings.Count(out, "(interrupted: no result)"); n != 1 || !strings.Contains(out, `{"cmd":"make"} (interrupted: no result)`+"\n\n[ASSISTANT]\ndone\n\n[USER]\ndo step B") {
		t.Fatalf("%d interrupted marks, want the first turn's only:\n%s", n, out)
	}
}

func TestPair(t *testing.T) {
	call := func(ids ...string) memory.Message {
		m := memory.Message{Role: memory.RoleAssistant}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, memory.ToolCall{ID: id, Name: "bash"})
		}
		return m
	}
	res := func(id string) memory.Message { return memory.Message{Role: memory.RoleTool, ToolCallID: id} }
	user := memory.Message{Role: memory.RoleUser}
	for _, tc := range []struct {
		name   string
		msgs   []memory.Message
		caller []int // per message
		call   []int
	}{
		{"parallel calls, results in another order", []memory.Message{user, call("a", "b"), res("b"), res("a")},
			[]int{-1, -1, 1, 1}, []int{-1, -1, 1, 0}},
		{"no ids: by position", []memory.Message{user, call("", ""), res(""), res("")},
			[]int{-1, -1, 1, 1}, []int{-1, -1, 0, 1}},
		{"calls split over two assistant messages", []memory.Message{user, call("a"), call("b"), res("a"), res("b")},
			[]int{-1, -1, -1, 1, 2}, []int{-1, -1, -1, 0, 0}},
		{"an id no call has: the open call of the turn", []memory.Message{user, call("a"), res("zz")},
			[]int{-1, -1, 1}, []int{-1, -1, 0}},
		{"a result more than calls", []memory.Message{user, call("a"), res("a"), res("a")},
			[]int{-1, -1, 1, 1}, []int{-1, -1, 0, -1}},
		{"the user spoke while the tool ran", []memory.Message{user, call(""), user, res("")},
			[]int{-1, -1, -1, 1}, []int{-1, -1, -1, 0}},
		{"an answered call of an earlier turn is not reused", []memory.Message{user, call("c1"), res("c1"), user, res("")},
			[]int{-1, -1, 1, -1, -1}, []int{-1, -1, 0, -1, -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := compact.Pair(tc.msgs)
			for j := range tc.msgs {
				if p.Caller[j] != tc.caller[j] || p.Call[j] != tc.call[j] {
					t.Errorf("message %d: caller %d call %d, want %d %d", j, p.Caller[j], p.Call[j], tc.caller[j], tc.call[j])
				}
			}
		})
	}
}
