package consolidate

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/engram-memory/engram/pkg/llm"
)

// EstimateTokens is the token estimate by which every step's prompt is
// bounded: llm.TokensUpperBound, the high estimate pkg/llm fits every
// prompt with (ASCII characters / 3, any other character a token), so that
// what the consolidator plans fits what the client and Ollama see.
func EstimateTokens(s string) int { return llm.TokensUpperBound(s) }

// NoteTokens bounds the step's own notes in the trailing message beyond the
// stored memories (MemoryTokens): the time, the ledger's digest, the last
// call's result, the directive and the cascade listing.
const NoteTokens = 1536

// MinTranscriptTokens is the least room a context must leave for the
// transcript window (Validate).
const MinTranscriptTokens = 256

// windowHeader heads the transcript window; windowHeaderMore when later
// messages wait for the next pass.
const (
	windowHeader     = "THE CONVERSATION (since the last pass)"
	windowHeaderMore = windowHeader + " — a part: the messages after these come in the next pass"
)

// systemText is the first message of every step.
var systemText = SystemText + "\n\n" + Instructions

// Budget is how a step's context window is shared, in estimated tokens
// (llm.RequestTokens, EstimateTokens).
type Budget struct {
	Context    int // the window: num_ctx of every call
	Reply      int // num_predict: the reply's room
	Fixed      int // the system text and instructions, the tool definitions, the messages' framing and the window's header (never cut)
	Memories   int // the stored memories listing (MemoryTokens; never cut)
	Notes      int // the step's notes (NoteTokens; the directive is never cut)
	Transcript int // what is left: the transcript window
}

// fixedTokens is what every step sends whatever the transcript and notes:
// the system message, the tools, the framing of the three messages and the
// window's longest header.
var fixedTokens = llm.RequestTokens(llm.Request{
	Messages: []llm.Message{llm.System(systemText), llm.User(windowHeaderMore + "\n"), llm.User("")},
	Tools:    AllTools(),
})

// BudgetFor shares a context window of window tokens: the transcript window
// gets what the fixed parts leave, so that every request fits by
// construction.
func (c Config) BudgetFor(window int) Budget {
	b := Budget{Context: window, Reply: c.ReplyTokens, Fixed: fixedTokens, Memories: c.MemoryTokens, Notes: NoteTokens}
	b.Transcript = b.Context - b.Reply - b.Fixed - b.Memories - b.Notes
	return b
}

// Budget is BudgetFor the window the consolidator assumes when the chat
// client cannot tell the model's (ContextTokens, else
// llm.DefaultContextLength).
func (c Config) Budget() Budget { return c.BudgetFor(c.window()) }

func (c Config) window() int {
	if c.ContextTokens > 0 {
		return c.ContextTokens
	}
	return llm.DefaultContextLength
}

// check reports a window too small for the consolidator's prompts.
func (b Budget) check() error {
	if b.Transcript < MinTranscriptTokens {
		return fmt.Errorf("a context window of %d tokens leaves %d for the transcript, fewer than %d (%s): raise the consolidation model's context (ENGRAM_CONSOLIDATE_CONTEXT_LENGTH) or lower ENGRAM_CONSOLIDATE_MEMORY_TOKENS",
			b.Context, b.Transcript, MinTranscriptTokens, b)
	}
	return nil
}

func (b Budget) String() string {
	return fmt.Sprintf("context %d = reply %d + instructions, tools and framing %d + memories %d + notes %d + transcript %d",
		b.Context, b.Reply, b.Fixed, b.Memories, b.Notes, b.Transcript)
}

// capTokens cuts s so that its estimate is at most n tokens, marking the
// cut with "…".
func capTokens(s string, n int) string {
	if EstimateTokens(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	// Walk the runes, counting as llm.TokensUpperBound does, keeping one
	// token for the mark.
	ascii, other, end := 0, 0, 0
	for i, r := range s {
		if r < 0x80 {
			ascii++
		} else {
			other++
		}
		if (ascii+2)/3+other > n-1 {
			break
		}
		end = i + utf8.RuneLen(r)
	}
	return s[:end] + "…"
}

// fitLines keeps the lines of a listing, first first, while they fit in n
// tokens (a line and its newline); what does not fit is said, "(3 more cut
// to fit the context)" (8 tokens at most, within n).
func fitLines(lines []string, n int) []string {
	total := 0
	for _, l := range lines {
		total += EstimateTokens(l) + 1
	}
	if total <= n {
		return lines
	}
	var out []string
	used := 0
	for i, l := range lines {
		t := EstimateTokens(l) + 1
		if used+t > n-cutNoteTokens {
			if n >= cutNoteTokens {
				out = append(out, fmt.Sprintf("(%d more cut to fit the context)", len(lines)-i))
			}
			return out
		}
		used += t
		out = append(out, l)
	}
	return out
}

// cutNoteTokens bounds fitLines's note.
const cutNoteTokens = 10

func joinLines(ls []string) string { return strings.Join(ls, "\n") }
