package consolidate

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// EstimateTokens is the consolidator's token estimate of a text, by which
// every step's prompt is bounded: four characters to a token (as
// llm.EstimateTokens counts), but a character of a script written without
// spaces (Han, Hiragana, Katakana: one or more tokens each in the models'
// vocabularies) counts as a token of its own, rounded up.
func EstimateTokens(s string) int {
	wide, other := 0, 0
	for _, r := range s {
		if r >= 0x2E80 && cjk(r) {
			wide++
		} else {
			other++
		}
	}
	return wide + (other+3)/4
}

// MessageTokens is the estimate of one chat message's framing (its role
// and separators in the model's template), as pkg/llm counts it.
const MessageTokens = 4

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

// toolTokens estimates the offered tools' definitions as the model gets
// them: their JSON, a tenth more for the shape Ollama renders (bounds
// written into the descriptions) and 8 tokens of framing each.
func toolTokens() int {
	n := 0
	for _, s := range AllTools() {
		b, _ := json.Marshal(s)
		n += EstimateTokens(string(b))*11/10 + 1 + 8
	}
	return n
}

// systemText is the first message of every step.
var systemText = SystemText + "\n\n" + Instructions

// Budget is how a step's context (ContextTokens) is shared, in estimated
// tokens (EstimateTokens).
type Budget struct {
	Context    int // num_ctx sent with every call
	Reply      int // num_predict: the reply's room
	Margin     int // a tenth of the context, for the estimate's error
	System     int // the system text and the instructions (never cut)
	Tools      int // the tool definitions
	Framing    int // the three messages' framing and the window's header
	Memories   int // the stored memories listing (MemoryTokens; never cut)
	Notes      int // the step's notes (NoteTokens; the directive is never cut)
	Transcript int // what is left: the transcript window
}

// Budget shares the context of a step: the transcript window gets what
// the fixed parts leave, so that every request fits by construction.
func (c Config) Budget() Budget {
	b := Budget{Context: c.ContextTokens, Reply: c.ReplyTokens, Margin: c.ContextTokens / 10,
		System: EstimateTokens(systemText), Tools: toolTokens(),
		Framing:  3*MessageTokens + EstimateTokens(windowHeaderMore) + 1,
		Memories: c.MemoryTokens, Notes: NoteTokens}
	b.Transcript = b.Context - b.Reply - b.Margin - b.System - b.Tools - b.Framing - b.Memories - b.Notes
	return b
}

func (b Budget) String() string {
	return fmt.Sprintf("context %d = reply %d + margin %d + instructions %d + tools %d + framing %d + memories %d + notes %d + transcript %d",
		b.Context, b.Reply, b.Margin, b.System, b.Tools, b.Framing, b.Memories, b.Notes, b.Transcript)
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
	// Walk the runes, counting as EstimateTokens does, keeping one token
	// for the mark.
	wide, other, end := 0, 0, 0
	for i, r := range s {
		if r >= 0x2E80 && cjk(r) {
			wide++
		} else {
			other++
		}
		if wide+(other+3)/4 > n-1 {
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
