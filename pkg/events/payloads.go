package events

import (
	"fmt"
	"time"
)

// TurnStarted (input) is published when the user sends a message, before the
// platform calls its model. The injector answers with an InjectionReady
// (to ReplyTo when set, and on ENGRAM_OUT).
type TurnStarted struct {
	// Text is the user's words for this turn. Required.
	Text string `json:"text"`
	// Paths are the repo-relative paths (forward slashes) the session is
	// working in; they anchor path-attached memories.
	Paths []string `json:"paths,omitempty"`
	// ProjectNames maps project ids to display names (for the block's text).
	ProjectNames map[string]string `json:"project_names,omitempty"`
	// ReplyTo is a core NATS subject (an inbox) where the platform waits for
	// the injection. Client.Inject sets it.
	ReplyTo string `json:"reply_to,omitempty"`
	// ReplyBy is when the platform stops waiting. An injector that gets the
	// event later should not reply nor record an injection (the platform went
	// on without memory). Zero: no deadline.
	ReplyBy time.Time `json:"reply_by,omitzero"`
}

// EventType implements Payload.
func (TurnStarted) EventType() Type { return TypeTurnStarted }

func (t TurnStarted) validate(p *problems) {
	if t.Text == "" {
		p.add("text", "missing")
	}
	nonEmpty(p, "paths", t.Paths, "empty path")
	for id := range t.ProjectNames {
		if id == "" {
			p.add("project_names", "empty project id")
		}
	}
	if t.ReplyTo != "" && !validSubject(t.ReplyTo) {
		p.add("reply_to", "not a valid subject")
	}
	p.time("reply_by", t.ReplyBy)
}

// Role of a message in a turn.
type Role string

// The roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ToolStatus is the outcome of a tool call.
type ToolStatus string

// The tool statuses.
const (
	ToolOK     ToolStatus = "ok"
	ToolFailed ToolStatus = "failed"
)

// ToolCall is a call an assistant message made.
type ToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`                // required
	Arguments string `json:"arguments,omitempty"` // JSON text, as the model wrote it
}

// Message is one message of a turn. The JSON field names match
// memory.Message so that workers convert field by field.
type Message struct {
	Role       Role       `json:"role"` // required: user | assistant | tool
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // assistant
	ToolName   string     `json:"tool_name,omitempty"`    // tool
	ToolCallID string     `json:"tool_call_id,omitempty"` // tool
	ToolStatus ToolStatus `json:"tool_status,omitempty"`  // tool: required, ok | failed
	TokensIn   int        `json:"tokens_in,omitempty"`    // assistant, if known
	TokensOut  int        `json:"tokens_out,omitempty"`   // assistant, if known
}

// TurnEnded (input) is published when the turn is complete: the user's
// message, the assistant's messages with their tool calls, and the tool
// results.
type TurnEnded struct {
	Messages []Message `json:"messages"` // required, at least one
	// ChangedPaths are repo-relative paths the turn modified (memories
	// attached to them may be stale).
	ChangedPaths []string `json:"changed_paths,omitempty"`
	// InputTokens is the prompt size of the turn's last model call; 0: unknown.
	InputTokens int64 `json:"input_tokens,omitempty"`
	// InjectedNodeIDs are the node ids of the injection_ready the turn's
	// prompt carried (Injection.NodeIDs), if any. The injector answers
	// before it records the injection; with them the extractor waits for a
	// record still being written (a store failover between the two) instead
	// of judging the turn as one without memories.
	InjectedNodeIDs []string `json:"injected_node_ids,omitempty"`
}

// EventType implements Payload.
func (TurnEnded) EventType() Type { return TypeTurnEnded }

func (t TurnEnded) validate(p *problems) {
	if len(t.Messages) == 0 {
		p.add("messages", "missing")
	}
	for i, m := range t.Messages {
		f := fmt.Sprintf("messages[%d].", i)
		switch m.Role {
		case RoleUser, RoleAssistant:
		case RoleTool:
			switch m.ToolStatus {
			case ToolOK, ToolFailed:
			case "":
				p.add(f+"tool_status", "missing")
			default:
				p.add(f+"tool_status", fmt.Sprintf("unknown status %q (want ok or failed)", string(m.ToolStatus)))
			}
		case "":
			p.add(f+"role", "missing")
		default:
			p.add(f+"role", fmt.Sprintf("unknown role %q", string(m.Role)))
		}
		for j, c := range m.ToolCalls {
			if c.Name == "" {
				p.add(fmt.Sprintf("%stool_calls[%d].name", f, j), "missing")
			}
		}
	}
	nonEmpty(p, "changed_paths", t.ChangedPaths, "empty path")
	nonEmpty(p, "injected_node_ids", t.InjectedNodeIDs, "empty id")
	if t.InputTokens < 0 {
		p.add("input_tokens", "negative")
	}
}

// SessionIdle (input) says a session has been quiet. The idle detector
// publishes it; a platform may too (e.g. when the user closes a chat).
type SessionIdle struct {
	LastActivity time.Time `json:"last_activity"` // required
}

// EventType implements Payload.
func (SessionIdle) EventType() Type { return TypeSessionIdle }

func (s SessionIdle) validate(p *problems) {
	if s.LastActivity.IsZero() {
		p.add("last_activity", "missing")
	}
	p.time("last_activity", s.LastActivity)
}

// TokensReported (input) reports the context size of a conversation after a
// turn; the compactor summarises older messages past a threshold.
type TokensReported struct {
	// StackID names the conversation within the session (an agent runtime
	// may run sub-conversations); empty: the session's main conversation.
	StackID string `json:"stack_id,omitempty"`
	// InputTokens of the last turn's model call; 0: unknown (the compactor
	// then estimates the stored messages since the last summary).
	InputTokens int64 `json:"input_tokens"`
	// ContextWindow of the model, if known (0: unknown).
	ContextWindow int64 `json:"context_window,omitempty"`
	// Ephemeral conversations (cron-like, automated) are never compacted.
	Ephemeral bool `json:"ephemeral,omitempty"`
	// Force asks for a compaction whatever the token count (the ephemeral
	// guard still holds): `engram compact` sets it.
	Force bool `json:"force,omitempty"`
}

// EventType implements Payload.
func (TokensReported) EventType() Type { return TypeTokensReported }

func (t TokensReported) validate(p *problems) {
	if t.InputTokens < 0 {
		p.add("input_tokens", "negative")
	}
	if t.ContextWindow < 0 {
		p.add("context_window", "negative")
	}
	if len(t.StackID) > MaxIDLen {
		p.add("stack_id", fmt.Sprintf("longer than %d bytes", MaxIDLen))
	}
}

// InjectionReady (output) carries the memory block for a turn.
type InjectionReady struct {
	// InReplyTo is the id of the turn_started event. Required.
	InReplyTo string `json:"in_reply_to"`
	// Block is the text to prepend to the turn's prompt; empty: nothing to add.
	Block string `json:"block"`
	// NodeIDs are the memories the block carries: standing instructions
	// first, then recalled context.
	NodeIDs []string `json:"node_ids,omitempty"`
	// Scores are the retrieval scores of NodeIDs, index for index (0 for a
	// standing instruction: selected, not ranked). Empty, or as long as
	// NodeIDs.
	Scores []float64 `json:"scores,omitempty"`
}

// EventType implements Payload.
func (InjectionReady) EventType() Type { return TypeInjectionReady }

func (r InjectionReady) validate(p *problems) {
	p.id("in_reply_to", r.InReplyTo, true)
	if len(r.Scores) > 0 && len(r.Scores) != len(r.NodeIDs) {
		p.add("scores", fmt.Sprintf("%d scores for %d node ids", len(r.Scores), len(r.NodeIDs)))
	}
}

// ChangeKind says what happened to a memory.
type ChangeKind string

// The change kinds (a reader must tolerate kinds it does not know).
const (
	ChangeCreated    ChangeKind = "created"
	ChangeReinforced ChangeKind = "reinforced"
	ChangeUpdated    ChangeKind = "updated"
	ChangeRevised    ChangeKind = "revised"
	ChangeSuperseded ChangeKind = "superseded"
	ChangeArchived   ChangeKind = "archived"
	ChangeRestored   ChangeKind = "restored"
	ChangeLinked     ChangeKind = "linked"
	ChangeUnlinked   ChangeKind = "unlinked"
	ChangeFeedback   ChangeKind = "feedback"
	ChangeStale      ChangeKind = "stale"
)

// Change is one memory that changed.
type Change struct {
	ID   string     `json:"id"`   // node id, required
	Kind ChangeKind `json:"kind"` // required
}

// MemoryChanged (output) lists the memories a worker changed. Session is
// optional (a project-level edit has none).
type MemoryChanged struct {
	Changes []Change `json:"changes"` // required, at least one
	// Cause is the id of the event that led to the change, if any.
	Cause string `json:"cause,omitempty"`
}

// EventType implements Payload.
func (MemoryChanged) EventType() Type { return TypeMemoryChanged }

// IDs returns the changed node ids in order.
func (m MemoryChanged) IDs() []string {
	ids := make([]string, len(m.Changes))
	for i, c := range m.Changes {
		ids[i] = c.ID
	}
	return ids
}

func (m MemoryChanged) validate(p *problems) {
	if len(m.Changes) == 0 {
		p.add("changes", "missing")
	}
	for i, c := range m.Changes {
		if c.ID == "" {
			p.add(fmt.Sprintf("changes[%d].id", i), "missing")
		}
		if c.Kind == "" {
			p.add(fmt.Sprintf("changes[%d].kind", i), "missing")
		}
	}
}

// ConsolidationDone (output) ends a consolidation pass over a session.
type ConsolidationDone struct {
	// UpTo is the session's consolidation cursor after the pass: the
	// newest message consolidated. From is the oldest message the pass
	// read (0: none), UpTo the newest unless the pass is read again
	// (reason stuck or budget with attempts left: the cursor stayed).
	UpTo    int64    `json:"up_to"`
	From    int64    `json:"from,omitempty"`
	Steps   int      `json:"steps"`             // tool-call steps used
	Changed []string `json:"changed,omitempty"` // node ids written
	// Reason is why it stopped: done, budget, stuck, or skipped (stuck or
	// over budget on its last attempt: the cursor moved past the messages
	// it read although they were not consolidated).
	Reason string `json:"reason,omitempty"`

	// Pass is the id of the pass's journal (engram memory history / undo).
	Pass string `json:"pass,omitempty"`
	// What the pass did: memories stored, revised, forgotten, topic links
	// made, duplicates refused and near-duplicates held for review.
	Stored     int `json:"stored,omitempty"`
	Revised    int `json:"revised,omitempty"`
	Forgotten  int `json:"forgotten,omitempty"`
	Linked     int `json:"linked,omitempty"`
	Duplicates int `json:"duplicates,omitempty"`
	Held       int `json:"held,omitempty"`
	Restored   int `json:"restored,omitempty"` // forgotten or closed memories made live again
	// Model tokens the pass spent.
	PromptTokens     int `json:"prompt_tokens,omitempty"`
	CompletionTokens int `json:"completion_tokens,omitempty"`
}

// EventType implements Payload.
func (ConsolidationDone) EventType() Type { return TypeConsolidationDone }

func (c ConsolidationDone) validate(p *problems) {
	if c.UpTo < 0 {
		p.add("up_to", "negative")
	}
	if c.From < 0 {
		p.add("from", "negative")
	}
	if c.Steps < 0 {
		p.add("steps", "negative")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"stored", c.Stored}, {"revised", c.Revised}, {"forgotten", c.Forgotten}, {"linked", c.Linked},
		{"duplicates", c.Duplicates}, {"held", c.Held}, {"restored", c.Restored}, {"prompt_tokens", c.PromptTokens}, {"completion_tokens", c.CompletionTokens}} {
		if f.v < 0 {
			p.add(f.name, "negative")
		}
	}
}

// CompactionDone (output) says a conversation's older messages were
// summarised.
type CompactionDone struct {
	StackID      string `json:"stack_id,omitempty"`
	UpTo         int64  `json:"up_to"` // the last message id the summary covers
	TokensBefore int64  `json:"tokens_before,omitempty"`
	TokensAfter  int64  `json:"tokens_after,omitempty"` // estimate
}

// EventType implements Payload.
func (CompactionDone) EventType() Type { return TypeCompactionDone }

func (c CompactionDone) validate(p *problems) {
	if c.UpTo < 0 {
		p.add("up_to", "negative")
	}
}

// nonEmpty reports each empty element of a list field with reason.
func nonEmpty(p *problems, field string, items []string, reason string) {
	for i, s := range items {
		if s == "" {
			p.add(fmt.Sprintf("%s[%d]", field, i), reason)
		}
	}
}

// Compile-time checks that every payload implements Payload.
var (
	_ Payload = TurnStarted{}
	_ Payload = TurnEnded{}
	_ Payload = SessionIdle{}
	_ Payload = TokensReported{}
	_ Payload = InjectionReady{}
	_ Payload = MemoryChanged{}
	_ Payload = ConsolidationDone{}
	_ Payload = CompactionDone{}
)
