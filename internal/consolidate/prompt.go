package consolidate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// SystemText is the role of the model in a pass.
const SystemText = `You maintain the long-term memory of a chat assistant about one user and one project. You work alone, between conversations, with memory tools.`

// Instructions are the pass instructions, sent every step.
const Instructions = `HOW THIS PASS WORKS
- Nobody is waiting and nothing you write reaches the user. A question left in the conversation below was asked of the assistant back then; it is not addressed to you now. Do not answer it.
- Each step you make exactly one memory tool call. Only tool calls change anything; prose is discarded. Call memory_done when memory matches the conversation.
- Memory is about the user and this project, never about the assistant itself.

WHAT TO KEEP
- Durable: preferences, intentions and plans, recurring activities, interests, facts about the user's life and work, decisions. Time-bound ones count too ("is training for a marathon in May").
- Passing: moods, one-off details, small talk, what the assistant said or did. Do not store them.

HOW TO WORK
- Store without searching first: memory_remember refuses what memory already holds and reports a near-duplicate. Use memory_recall only to check one concrete point.
- One atomic fact per memory. To split a bundled fact, store every atomic piece FIRST and forget the bundle only after all pieces stand. A bundle whose pieces already stand is forgotten.
- When the conversation overturned a fact, memory_revise it (the old one stays readable as of earlier days). Forget what was wrong or never about this user or project.
- A dated fact whose date has passed with no sign that it recurs is forgotten.
- Two or more dated instances of one recurring activity become one dateless pattern: revise the newest into the pattern, forget the older ones.
- Make a topic only when it is durable (it came up more than once, or you just generalised it), and choose the relation by its kind: interested_in for likes and interests, involved_in for activities, part_of for a piece of something larger, related_to for being about it, mentioned_with for things that came up together.
- Memories are named by short ids in square brackets, like [f3]; name a memory by its short id exactly as shown.`

// window is the transcript a pass reads: the oldest user and assistant
// messages after the pass's start, as many as fit.
type window struct {
	Text   string
	From   int64 // the oldest message id shown (0: none)
	Newest int64 // the newest message id shown (0: none)
	Count  int   // messages shown
	// More: a user or assistant message after Newest waits for a later
	// pass.
	More bool
	// Tail is the newest message id read past the shown ones when none
	// was shown (tool messages only): the cursor may skip them.
	Tail int64
	// Said is the text of the user's messages shown, what a fact the
	// model says the user said must share a word with (memory.Grounded).
	Said string
}

// windowPage is how many messages a window reads from the store at a time.
func windowPage(maxMessages int) int { return max(4*maxMessages, 64) }

// readWindow reads the window of a pass starting after message after: the
// oldest user and assistant messages, at most maxMessages of them, each
// cut to MessageChars, WindowChars and b.Transcript tokens in all
// (a first message longer than that is cut to fit), neutralised and
// redacted. It reads the transcript in pages, never more of it than the
// window needs.
func (c *Consolidator) readWindow(ctx context.Context, ref memory.SessionRef, after int64, maxMessages int, b Budget) (window, error) {
	var w window
	budget := b.Transcript
	chars, tokens := 0, 0
	var lines, said []string
	page := windowPage(maxMessages)
	for {
		msgs, err := c.store.Messages(ctx, ref, after, page)
		if err != nil {
			return w, fmt.Errorf("consolidate: transcript of %s: %w", ref, err)
		}
		for _, m := range msgs {
			if (m.Role != memory.RoleUser && m.Role != memory.RoleAssistant) || strings.TrimSpace(m.Content) == "" {
				if w.Count == 0 {
					w.Tail = m.ID
				}
				continue
			}
			line := c.messageLine(m)
			n, t := len([]rune(line))+1, EstimateTokens(line)+1
			if w.Count >= maxMessages || (w.Count > 0 && (chars+n > c.cfg.WindowChars || tokens+t > budget)) {
				w.More = true
				break
			}
			if w.Count == 0 && (n > c.cfg.WindowChars || t > budget) {
				line = capTokens(capChars(line, c.cfg.WindowChars-1), budget-1)
				n, t = len([]rune(line))+1, EstimateTokens(line)+1
			}
			lines = append(lines, line)
			if m.Role == memory.RoleUser {
				said = append(said, m.Content)
			}
			chars, tokens = chars+n, tokens+t
			w.Count++
			if w.From == 0 {
				w.From = m.ID
			}
			w.Newest = m.ID
		}
		if w.More || len(msgs) < page {
			break
		}
		after = msgs[len(msgs)-1].ID
	}
	w.Text = strings.Join(lines, "\n")
	w.Said = strings.Join(said, "\n")
	return w, nil
}

// messageLine renders one transcript message for the window.
func (c *Consolidator) messageLine(m memory.Message) string {
	who := "USER"
	if m.Role == memory.RoleAssistant {
		who = "ASSISTANT"
	}
	day := ""
	if !m.CreatedAt.IsZero() {
		day = " (" + m.CreatedAt.UTC().Format("2006-01-02 15:04") + ")"
	}
	return who + day + ": " + capChars(memory.Neutralise(memory.Redact(m.Content)), c.cfg.MessageChars)
}

// moreLine says how many stored memories the listing left out.
const moreLineTokens = 12

// memoriesBlock lists the memories stored for this project and user,
// newest first, within MemoryTokens, each named by its short id.
func (c *Consolidator) memoriesBlock(ctx context.Context, ref memory.SessionRef, l *Ledger, now time.Time) (string, error) {
	ns, err := c.store.Timeline(ctx, memory.TimelineQuery{
		Filter: memory.Filter{TenantID: ref.Tenant, ProjectID: ref.Project, SessionID: ref.Session, IncludeSuperseded: true}, Limit: memory.DefaultChannelLimit})
	if err != nil {
		return "", fmt.Errorf("consolidate: stored memories: %w", err)
	}
	var lines []string
	budget := c.cfg.MemoryTokens - moreLineTokens
	for i := range ns {
		line := memoryLine(&ns[i], now, l.ShortID)
		t := EstimateTokens(line) + 1
		if t > budget {
			break
		}
		budget -= t
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		if len(ns) == 0 {
			return "(none stored yet)", nil
		}
		return fmt.Sprintf("(%d stored, none short enough to list; recall finds them)", len(ns)), nil
	}
	if len(lines) < len(ns) {
		lines = append(lines, fmt.Sprintf("(%d more not shown; recall finds them)", len(ns)-len(lines)))
	}
	return strings.Join(lines, "\n"), nil
}

// messages builds one step's context: system text and instructions, the
// transcript window, and the trailing message with the time, the stored
// memories, the ledger's digest, the last call's result and the directive.
// The trailing message is bounded by MemoryTokens + NoteTokens: the time,
// the memories listing (bounded on its own), the digest's first line and
// the directive are never cut; the last call's result, the cascade listing
// and the digest's steps get what is left, in that order, and a cut is
// said where it is made.
func (c *Consolidator) messages(w window, memories string, l *Ledger, now time.Time) []llm.Message {
	lim := c.cfg.Limits
	// What the ledger holds echoes the model (its prose, the facts it
	// wrote, which may quote the transcript): neutralised before it is
	// measured and shown.
	d := l.directive(lim)
	d.Text = memory.NeutraliseText(d.Text)
	head := fmt.Sprintf("[Now: %s]\n\nSTORED MEMORIES\n%s\n\nTHIS PASS\n%s", now.UTC().Format("2006-01-02 15:04 MST (Monday)"), memories, memory.NeutraliseText(l.digestHead(lim)))
	next := "\n\nNEXT\n" + d.Text
	left := c.cfg.MemoryTokens + NoteTokens - EstimateTokens(head) - EstimateTokens(next) - 2
	var detail string
	if l.Detail != "" && left > cutNoteTokens+8 {
		const title = "\n\nRESULT OF YOUR LAST CALL\n"
		lines := fitLines(strings.Split(memory.NeutraliseText(l.Detail), "\n"), left-EstimateTokens(title)-1)
		detail = title + strings.Join(lines, "\n")
		left -= EstimateTokens(detail) + 1
	}
	if d.Kind != DirectiveFinished && len(l.Cascade) > 0 && left > EstimateTokens(cascadeHeader)+cutNoteTokens+2 {
		listing := "\n" + cascadeHeader + "\n" + strings.Join(fitLines(neutraliseLines(l.Cascade), left-EstimateTokens(cascadeHeader)-2), "\n")
		next += listing
		left -= EstimateTokens(listing) + 1
	}
	var steps string
	if ss := neutraliseLines(l.digestSteps()); len(ss) > 0 && left > cutNoteTokens+2 {
		// The newest steps matter most: fit from the newest back.
		slices.Reverse(ss)
		kept := fitLines(ss, left-1)
		slices.Reverse(kept)
		steps = "\n" + strings.Join(kept, "\n")
	}
	header := windowHeader
	if w.More {
		header = windowHeaderMore
	}
	return []llm.Message{
		llm.System(systemText),
		llm.User(header + "\n" + w.Text),
		llm.User(head + steps + detail + next),
	}
}

// neutraliseLines neutralises each line (memory.Neutralise).
func neutraliseLines(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = memory.Neutralise(l)
	}
	return out
}
