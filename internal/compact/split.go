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
// separate an assistant's tool calls from their results (Pair) moves before
// the assistant message that made the calls.
func Split(msgs []memory.Message, keepRecent int) int {
	n := len(msgs)
	if n <= keepRecent {
		return 0
	}
	b := min(n-keepRecent, n-1) // the latest message is never covered
	for b > 0 && msgs[b].Role != memory.RoleUser {
		b--
	}
	if b == 0 {
		return 0
	}
	p := Pair(msgs)
	for b > 0 {
		moved := p.boundary(b)
		if moved == b {
			break
		}
		b = moved
	}
	return b
}

// Pairing says which tool call each tool result answers (Pair).
type Pairing struct {
	// Caller[j] is the index of the assistant message whose call the
	// tool result msgs[j] answers; -1 for any other message and for a
	// result that answers no call.
	Caller []int
	// Call[j] is the index of that call in the assistant message's
	// ToolCalls; -1 when the result pairs with the message by position
	// beyond its calls (more results than calls).
	Call []int
	// Answered[i][k] says whether the k-th call of the assistant message
	// msgs[i] has a result among msgs.
	Answered map[int][]bool
	// suffixMin[p] is the smallest Caller of the results at p or after
	// (len(msgs) when none).
	suffixMin []int
}

// pairReach bounds how far back a result's call id is looked for: across
// at most this many user messages (a call and its result are in the same
// turn, or the next when the user spoke while the tool ran).
const pairReach = 2

// Pair pairs every tool result of msgs with the call it answers, by
// position within the assistant message and its results rather than by id
// alone, so that a platform that numbers calls per turn ("c1" in every
// turn) or sends no ids works. Walking back from the result (across at
// most pairReach user messages): the nearest assistant message with an
// unanswered call of the result's id; else (no id, or none matches) the
// first unanswered call of the nearest assistant message with one,
// preferring the result's own turn; else, as an extra result, the nearest
// assistant message with calls in its turn; else it answers no call.
func Pair(msgs []memory.Message) Pairing {
	n := len(msgs)
	p := Pairing{Caller: make([]int, n), Call: make([]int, n), Answered: map[int][]bool{}, suffixMin: make([]int, n+1)}
	for j := range msgs {
		p.Caller[j], p.Call[j] = -1, -1
		if msgs[j].Role == memory.RoleAssistant && len(msgs[j].ToolCalls) > 0 {
			p.Answered[j] = make([]bool, len(msgs[j].ToolCalls))
		}
	}
	for j, m := range msgs {
		if m.Role != memory.RoleTool {
			continue
		}
		// Walk back: an unanswered call with the result's id wins; else the
		// nearest assistant message of the turn with an open call, else
		// the nearest with an open call at all (a user spoke while the tool
		// ran), else the nearest of the turn (a result more than calls).
		nearest, open, users := -1, -1, 0
		for i := j - 1; i >= 0 && users <= pairReach; i-- {
			a := msgs[i]
			if a.Role == memory.RoleUser {
				users++
				continue
			}
			if a.Role != memory.RoleAssistant || len(a.ToolCalls) == 0 {
				continue
			}
			if nearest < 0 && users == 0 {
				nearest = i
			}
			if m.ToolCallID != "" {
				if k := unanswered(a.ToolCalls, p.Answered[i], m.ToolCallID); k >= 0 {
					p.Caller[j], p.Call[j] = i, k
					break
				}
			}
			if open < 0 && unanswered(a.ToolCalls, p.Answered[i], "") >= 0 {
				open = i
				if m.ToolCallID == "" {
					break
				}
			}
		}
		if p.Caller[j] < 0 {
			switch {
			case open >= 0:
				p.Caller[j], p.Call[j] = open, unanswered(msgs[open].ToolCalls, p.Answered[open], "")
			case nearest >= 0:
				p.Caller[j] = nearest
			}
		}
		if i, k := p.Caller[j], p.Call[j]; i >= 0 && k >= 0 {
			p.Answered[i][k] = true
		}
	}
	p.suffixMin[n] = n
	for j := n - 1; j >= 0; j-- {
		p.suffixMin[j] = p.suffixMin[j+1]
		if c := p.Caller[j]; c >= 0 {
			p.suffixMin[j] = min(p.suffixMin[j], c)
		}
	}
	return p
}

// unanswered is the index of the first call not yet answered, with id
// when id is not empty; -1 when there is none.
func unanswered(calls []memory.ToolCall, answered []bool, id string) int {
	for k, c := range calls {
		if !answered[k] && (id == "" || c.ID == id) {
			return k
		}
	}
	return -1
}

// boundary moves b before any assistant message of msgs[:b] whose calls
// are answered in msgs[b:].
func (p Pairing) boundary(b int) int {
	return min(b, p.suffixMin[b])
}

// Separates reports whether a boundary before msgs[b] would separate a
// tool call from its result.
func (p Pairing) Separates(b int) bool { return p.suffixMin[b] < b }
