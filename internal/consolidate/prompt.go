package consolidate

import (
	"context"
	"fmt"
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
- Memory ids are the text in square brackets; copy them exactly.`

// window is the transcript a pass reads.
type window struct {
	Text   string
	Newest int64 // the newest message id in it (0: none)
	Count  int
}

// buildWindow renders the messages since the cursor: at most the last
// WindowMessages user and assistant messages, each cut to MessageChars,
// WindowChars in all (the oldest dropped first), neutralised and redacted.
func (c *Consolidator) buildWindow(msgs []memory.Message) window {
	var w window
	if n := len(msgs); n > 0 {
		w.Newest = msgs[n-1].ID
	}
	var keep []memory.Message
	for _, m := range msgs {
		if (m.Role == memory.RoleUser || m.Role == memory.RoleAssistant) && strings.TrimSpace(m.Content) != "" {
			keep = append(keep, m)
		}
	}
	if len(keep) > c.cfg.WindowMessages {
		keep = keep[len(keep)-c.cfg.WindowMessages:]
	}
	lines := make([]string, len(keep))
	total := 0
	for i, m := range keep {
		who := "USER"
		if m.Role == memory.RoleAssistant {
			who = "ASSISTANT"
		}
		day := ""
		if !m.CreatedAt.IsZero() {
			day = " (" + m.CreatedAt.UTC().Format("2006-01-02 15:04") + ")"
		}
		lines[i] = who + day + ": " + capChars(memory.Neutralise(memory.Redact(m.Content)), c.cfg.MessageChars)
		total += len([]rune(lines[i])) + 1
	}
	for len(lines) > 1 && total > c.cfg.WindowChars {
		total -= len([]rune(lines[0])) + 1
		lines = lines[1:]
	}
	if len(lines) == 1 {
		lines[0] = capChars(lines[0], c.cfg.WindowChars)
	}
	w.Text, w.Count = strings.Join(lines, "\n"), len(lines)
	return w
}

// memoriesBlock lists the memories stored for this project and user,
// newest first, within MemoryTokens.
func (c *Consolidator) memoriesBlock(ctx context.Context, ref memory.SessionRef, now time.Time) (string, error) {
	ns, err := c.store.Timeline(ctx, memory.TimelineQuery{
		Filter: memory.Filter{TenantID: ref.Tenant, ProjectID: ref.Project, SessionID: ref.Session, IncludeSuperseded: true}, Limit: memory.DefaultChannelLimit})
	if err != nil {
		return "", fmt.Errorf("consolidate: stored memories: %w", err)
	}
	var lines []string
	budget := c.cfg.MemoryTokens
	for i := range ns {
		line := memoryLine(&ns[i], now)
		t := llm.EstimateTokens(line) + 1
		if t > budget {
			break
		}
		budget -= t
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return "(none stored yet)", nil
	}
	if len(lines) < len(ns) {
		lines = append(lines, fmt.Sprintf("(%d more not shown; recall finds them)", len(ns)-len(lines)))
	}
	return strings.Join(lines, "\n"), nil
}

// messages builds one step's context: system text, instructions, the
// transcript window, and the trailing message with the time, the stored
// memories, the ledger's digest, the last call's result and the directive.
func (c *Consolidator) messages(w window, memories string, l *Ledger, now time.Time) []llm.Message {
	lim := c.cfg.Limits
	var b strings.Builder
	// the ledger echoes what the model wrote (which may quote the transcript)
	fmt.Fprintf(&b, "[Now: %s]\n\nSTORED MEMORIES\n%s\n\nTHIS PASS\n%s\n", now.UTC().Format("2006-01-02 15:04 MST (Monday)"), memories, memory.NeutraliseText(l.Digest(lim)))
	if l.Detail != "" {
		fmt.Fprintf(&b, "\nRESULT OF YOUR LAST CALL\n%s\n", memory.NeutraliseText(l.Detail))
	}
	fmt.Fprintf(&b, "\nNEXT\n%s", memory.NeutraliseText(l.Directive(lim).Text)) // it quotes the model's prose
	return []llm.Message{
		llm.System(SystemText + "\n\n" + Instructions),
		llm.User("THE CONVERSATION (since the last pass)\n" + w.Text),
		llm.User(b.String()),
	}
}
