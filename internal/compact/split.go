package compact

import "github.com/engram-memory/engram/pkg/memory"

// Split returns the index of the first message the summary does not cover:
// msgs[:i] are summarised, msgs[i:] are kept and sent as they are. 0 means
// there is nothing to compact. msgs are the messages since the latest
// summary's boundary, oldest first.
//
// The rules: nothing to do with keepRecent messages or fewer; otherwise the
// boundary walks back from len-keepRecent to the nearest user message
// (nothing to do when that is the first message); a boundary that would
// separate an assistant's tool calls from their results moves before the
// assistant message that made the calls.
func Split(msgs []memory.Message, keepRecent int) int {
	n := len(msgs)
	if n <= keepRecent {
		return 0
	}
	b := min(n-keepRecent, n-1) // the latest message is never covered
	for b > 0 && msgs[b].Role != memory.RoleUser {
		b--
	}
	for b > 0 {
		moved := pairBoundary(msgs, b)
		if moved == b {
			break
		}
		b = moved
	}
	return b
}

// pairBoundary moves b before any assistant message of msgs[:b] whose tool
// calls are answered in msgs[b:]: a result is matched to its call by call
// id, and a result without an id to the nearest assistant message with tool
// calls before it.
func pairBoundary(msgs []memory.Message, b int) int {
	calls := map[string]int{} // call id -> index of the assistant message
	for i := range b {
		if msgs[i].Role == memory.RoleAssistant {
			for _, c := range msgs[i].ToolCalls {
				if c.ID != "" {
					calls[c.ID] = i
				}
			}
		}
	}
	to := b
	caller := -1 // the nearest assistant message with tool calls before j
	for i := b - 1; i >= 0; i-- {
		if msgs[i].Role == memory.RoleAssistant && len(msgs[i].ToolCalls) > 0 {
			caller = i
			break
		}
	}
	for j := b; j < len(msgs); j++ {
		m := msgs[j]
		switch {
		case m.Role == memory.RoleAssistant && len(m.ToolCalls) > 0:
			caller = j
		case m.Role != memory.RoleTool:
		case m.ToolCallID != "":
			if i, ok := calls[m.ToolCallID]; ok {
				to = min(to, i)
			}
		case caller >= 0 && caller < b:
			to = min(to, caller)
		}
	}
	return to
}
