package compact

import (
	"errors"
	"fmt"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// ErrWindowTooSmall: the summarize model's context window cannot hold the
// instructions, the previous summary, one message and the reply. Permanent
// (a configuration problem: ENGRAM_SUMMARIZE_CONTEXT_LENGTH or the model).
var ErrWindowTooSmall = errors.New("compact: the summarize model's context window is too small for a summary call")

// minReply is the smallest reply budget a step may have.
const minReply = 256

// Step is one summary call of a compaction: it covers msgs[From:To] of the
// covered messages and updates the summary so far.
type Step struct {
	From, To int
	// Budget is the reply's num_predict (OutputBudget), Words the length
	// target the prompt states (Words).
	Budget, Words int
	// Boundary: To is a valid boundary (a user message that no tool call
	// pairs across, or the end), so the summary after this step may be
	// saved as the session's summary. A step that ends inside a turn (one
	// turn larger than the window) is not saved until a later one ends at
	// a boundary.
	Boundary bool
	// Prompt is the call's messages; PromptTokens their upper-bound
	// estimate (llm.RequestTokens), at most Window - Budget.
	Prompt       []llm.Message
	PromptTokens int
}

// planner cuts a compaction into steps that each fit the window.
type planner struct {
	cfg    Config
	msgs   []memory.Message // the covered messages
	parts  []string         // each message rendered (renderMessage)
	sizes  []int            // llm.TokensUpperBound of each part plus its separator
	stored []int64          // MessageTokens of each message
	valid  []bool           // valid[p]: a boundary may go before msgs[p]
	window int
	base   int // the instructions' tokens (a first prompt without messages)
}

func newPlanner(covered []memory.Message, cfg Config, window int) *planner {
	p := &planner{cfg: cfg, msgs: covered, window: window,
		parts: make([]string, len(covered)), sizes: make([]int, len(covered)),
		stored: make([]int64, len(covered)), valid: make([]bool, len(covered)+1)}
	pair := Pair(covered)
	for i, m := range covered {
		p.parts[i] = renderMessage(m, pair.Answered[i], cfg)
		p.sizes[i] = llm.TokensUpperBound(p.parts[i]) + 1 // "\n\n" between messages
		p.stored[i] = MessageTokens(m)
		p.valid[i] = i > 0 && m.Role == memory.RoleUser && !pair.Separates(i)
	}
	p.valid[len(covered)] = true // the compaction's boundary (Split)
	p.base = llm.RequestTokens(llm.Request{Messages: promptWith("", "", 99999)})
	return p
}

// next plans the step that starts at msgs[from] after the summary prev:
// the longest run of messages whose prompt and reply fit the window,
// ending at a boundary when one is at least halfway as far as the longest
// run that fits at all.
func (p *planner) next(prev string, from int) (Step, error) {
	prevTokens := int64(llm.EstimateTokens(prev))
	fixed := llm.RequestTokens(llm.Request{Messages: promptWith(prev, "", 99999)})
	room := p.window - p.base
	var chunk int
	var stored int64
	best, bestValid := -1, -1
	for to := from + 1; to <= len(p.msgs); to++ {
		chunk += p.sizes[to-1]
		stored += p.stored[to-1]
		budget := OutputBudget(stored, prevTokens, room, p.cfg)
		if budget < minReply || fixed+chunk+budget > p.window {
			break
		}
		best = to
		if p.valid[to] {
			bestValid = to
		}
	}
	if best < 0 {
		return Step{}, fmt.Errorf("%w: window %d tokens, instructions and previous summary %d, the next message %d, a reply at least %d",
			ErrWindowTooSmall, p.window, fixed, p.sizes[from], minReply)
	}
	to := best
	if bestValid > from && (bestValid-from)*2 >= best-from {
		to = bestValid
	}
	for {
		st := p.step(prev, prevTokens, from, to, room)
		if st.PromptTokens+st.Budget <= p.window || to == from+1 {
			if st.PromptTokens+st.Budget > p.window {
				return Step{}, fmt.Errorf("%w: window %d tokens, a prompt of %d and a reply of %d", ErrWindowTooSmall, p.window, st.PromptTokens, st.Budget)
			}
			return st, nil
		}
		to-- // the parts' sum bounds the whole; never reached in practice
	}
}

func (p *planner) step(prev string, prevTokens int64, from, to, room int) Step {
	var stored int64
	for _, n := range p.stored[from:to] {
		stored += n
	}
	budget := OutputBudget(stored, prevTokens, room, p.cfg)
	replaced := stored
	if prev == "" {
		// The first summary adds its block's frame to the context (an
		// update's frame replaces the previous one): its target leaves
		// room for it (Check counts the block).
		replaced = max(0, stored-frameTokens)
	}
	words := Words(budget, replaced, prevTokens)
	msgs := promptWith(prev, joinRendered(p.parts[from:to]), words)
	return Step{From: from, To: to, Budget: budget, Words: words, Boundary: p.valid[to],
		Prompt: msgs, PromptTokens: llm.RequestTokens(llm.Request{Messages: msgs})}
}
