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
	b := n - keepRecent
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
// calls are answered in msgs[b:], and before the assistant message of a tool
// result at msgs[b:] whose call is in msgs[:b] (matched by call id, or, for
// results without an id, the run of tool results directly after it).
func pairBoundary(msgs []memory.Message, b int) int {
	calls := map[string]int{} // call id -> index of the assistant message
	last := -1                // index of the last assistant message with calls before b
	for i := range b {
		if msgs[i].Role == memory.RoleAssistant && len(msgs[i].ToolCalls) > 0 {
			last = i
			for _, c := range msgs[i].ToolCalls {
				if c.ID != "" {
					calls[c.ID] = i
				}
			}
		}
	}
	to := b
	for j := b; j < len(msgs); j++ {
		m := msgs[j]
		if m.Role != memory.RoleTool {
			continue
		}
		if i, ok := calls[m.ToolCallID]; ok && m.ToolCallID != "" {
			to = min(to, i)
			continue
		}
		// A result without a known id directly after the boundary belongs
		// to the run of the assistant message before it.
		if m.ToolCallID == "" && j == b && last >= 0 && onlyToolsBetween(msgs, last, b) {
			to = min(to, last)
		}
	}
	return to
}

// onlyToolsBetween reports whether msgs[from+1:to] are all tool results.
func onlyToolsBetween(msgs []memory.Message, from, to int) bool {
	for i := from + 1; i < to; i++ {
		if msgs[i].Role != memory.RoleTool {
			return false
		}
	}
	return true
}
