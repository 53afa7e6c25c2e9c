package contract

import (
	"reflect"

	"github.com/engram-memory/engram/pkg/events"
)

// specs describe every JSON field of the contract's Go types, by the Go
// type that declares it and its JSON name. CheckSpecs (and the generator)
// fail on a field without one, so a field added to pkg/events is
// described here before the document can be generated.
var specs = map[reflect.Type]map[string]spec{
	reflect.TypeFor[events.Envelope](): {
		"id":          {doc: "Unique id of the event (a ULID-like 26-character Crockford base32 string from the Go and TypeScript clients; any id is accepted). Also the Nats-Msg-Id header: JetStream drops a second publish of the same id within the stream's duplicate window (two minutes).", required: true, id: true},
		"type":        {doc: "The event type; also the third subject token.", required: true, enum: typeNames()},
		"version":     {doc: "Schema version of the envelope. A reader refuses a version newer than the one it knows; additive changes keep the version.", required: true, version: true},
		"occurred_at": {doc: "When the event happened (RFC 3339). Refused before 2000-01-01 and more than a day ahead of the reader's clock.", required: true, bounded: true},
		"tenant_id":   {doc: "The tenant that owns the project. Absent or empty: the default tenant. Must be the subject's tenant token, decoded.", id: true},
		"project_id":  {doc: "The project (any characters). Must be the subject's project token, decoded.", required: true, id: true},
		"session_id":  {doc: "The session (conversation). Required for every type but memory_changed. Must be the subject's session token, decoded.", id: true},
		"turn_id":     {doc: "The turn: required for turn_started, turn_ended and injection_ready.", id: true},
		"payload":     {doc: "The typed body: its shape is the event type's (see each message).", required: true},
	},
	reflect.TypeFor[events.TurnStarted](): {
		"text":          {doc: "The user's words for this turn.", required: true},
		"paths":         {doc: "Repository-relative paths (forward slashes) the session works in; they anchor path-attached memories. No empty path.", nonEmptyItems: true},
		"project_names": {doc: "Display names of project ids, for the block's text. No empty key.", nonEmptyItems: true},
		"reply_to":      {doc: "Where the platform waits for the injection_ready: a core NATS subject in the tenant's reply inbox (_INBOX. for the default tenant unless configured, _INBOX_TENANT.<tenant token>. for a named tenant). The injector refuses (dead-letters) any other.", subject: true},
		"reply_by":      {doc: "When the platform stops waiting. An injector that gets the event later neither replies nor records an injection.", bounded: true},
	},
	reflect.TypeFor[events.TurnEnded](): {
		"messages":          {doc: "The turn's messages in order: the user's, the assistant's with their tool calls, the tool results.", required: true, minItems: 1},
		"changed_paths":     {doc: "Repository-relative paths the turn modified (memories attached to them may be stale). No empty path.", nonEmptyItems: true},
		"input_tokens":      {doc: "Prompt size of the turn's last model call; 0: unknown.", nonNegative: true},
		"injected_node_ids": {doc: "The node_ids of the injection_ready the turn's prompt carried, if any. The injector answers before it records the injection; with them the extractor waits for a record still being written (a minute at most from its first look), so the memories' feedback is not lost to a store failover between the two. No empty id.", nonEmptyItems: true},
	},
	reflect.TypeFor[events.Message](): {
		"role":         {doc: "Who wrote the message.", required: true, enum: []string{string(events.RoleUser), string(events.RoleAssistant), string(events.RoleTool)}},
		"content":      {doc: "The message's text."},
		"tool_calls":   {doc: "The tool calls of an assistant message."},
		"tool_name":    {doc: "The tool whose result a tool message carries."},
		"tool_call_id": {doc: "The call a tool message answers."},
		"tool_status":  {doc: "The outcome of a tool call: required for a tool message.", enum: []string{string(events.ToolOK), string(events.ToolFailed)}, requiredIf: [2]string{"role", string(events.RoleTool)}},
		"tokens_in":    {doc: "An assistant message's prompt tokens, if known."},
		"tokens_out":   {doc: "An assistant message's completion tokens, if known."},
	},
	reflect.TypeFor[events.ToolCall](): {
		"id":        {doc: "The call's id, as the model gave it."},
		"name":      {doc: "The tool called.", required: true},
		"arguments": {doc: "The arguments as the model wrote them (JSON text)."},
	},
	reflect.TypeFor[events.SessionIdle](): {
		"last_activity": {doc: "When the session was last active.", required: true, bounded: true},
	},
	reflect.TypeFor[events.TokensReported](): {
		"stack_id":       {doc: "The conversation within the session (an agent runtime may run sub-conversations); empty: the session's main conversation.", maxBytes: events.MaxIDLen},
		"input_tokens":   {doc: "Prompt size of the last turn's model call; 0: unknown (the compactor then estimates the stored messages).", nonNegative: true},
		"context_window": {doc: "The model's context window, if known (0: unknown).", nonNegative: true},
		"ephemeral":      {doc: "An automated conversation that is never compacted."},
		"force":          {doc: "Compact whatever the token count (an ephemeral conversation still is not)."},
	},
	reflect.TypeFor[events.InjectionReady](): {
		"in_reply_to": {doc: "The id of the turn_started event this answers.", required: true, id: true},
		"block":       {doc: "The text to prepend to the turn's prompt; empty: nothing to add."},
		"node_ids":    {doc: "The memories the block carries: standing instructions first, then recalled context."},
		"scores":      {doc: "The retrieval scores of node_ids, index for index (0 for a standing instruction); empty, or as long as node_ids.", sameLengthAs: "node_ids"},
	},
	reflect.TypeFor[events.MemoryChanged](): {
		"changes": {doc: "The memories that changed.", required: true, minItems: 1},
		"cause":   {doc: "The id of the event that led to the change, if any."},
	},
	reflect.TypeFor[events.Change](): {
		"id": {doc: "The memory's node id.", required: true},
		"kind": {doc: "What happened to it. A reader must tolerate kinds it does not know.", required: true, open: true,
			enum: []string{string(events.ChangeCreated), string(events.ChangeReinforced), string(events.ChangeUpdated), string(events.ChangeRevised),
				string(events.ChangeSuperseded), string(events.ChangeArchived), string(events.ChangeRestored), string(events.ChangeLinked),
				string(events.ChangeUnlinked), string(events.ChangeFeedback), string(events.ChangeStale)}},
	},
	reflect.TypeFor[events.ConsolidationDone](): {
		"up_to":             {doc: "The session's consolidation cursor after the pass: the newest message consolidated.", nonNegative: true},
		"from":              {doc: "The oldest message the pass read (0: none); up_to is the newest unless the pass is read again (reason stuck or budget with attempts left: the cursor stayed).", nonNegative: true},
		"steps":             {doc: "Tool-call steps used.", nonNegative: true},
		"changed":           {doc: "Node ids written."},
		"reason":            {doc: "Why the pass stopped: done, budget, stuck, or skipped (stuck or over budget on its last attempt: the cursor moved past the messages it read although they were not consolidated)."},
		"pass":              {doc: "The id of the pass's journal (engram memory history / undo)."},
		"stored":            {doc: "Memories stored.", nonNegative: true},
		"revised":           {doc: "Memories revised.", nonNegative: true},
		"forgotten":         {doc: "Memories forgotten.", nonNegative: true},
		"linked":            {doc: "Topic links made.", nonNegative: true},
		"duplicates":        {doc: "Duplicates refused.", nonNegative: true},
		"held":              {doc: "Near-duplicates held for review.", nonNegative: true},
		"restored":          {doc: "Forgotten or closed memories made live again.", nonNegative: true},
		"prompt_tokens":     {doc: "Model prompt tokens the pass spent.", nonNegative: true},
		"completion_tokens": {doc: "Model completion tokens the pass spent.", nonNegative: true},
	},
	reflect.TypeFor[events.CompactionDone](): {
		"stack_id":      {doc: "The conversation within the session; empty: the main one."},
		"up_to":         {doc: "The last transcript message id the summary covers.", nonNegative: true},
		"tokens_before": {doc: "The conversation's tokens before."},
		"tokens_after":  {doc: "The conversation's tokens after (an estimate)."},
	},
	reflect.TypeFor[events.ContextRequest](): {
		"tenant_id": {doc: "When set, must be the subject's tenant; may be left out.", id: true},
		"after_id":  {doc: "Ask for the next page: messages with a larger id, no block. 0 or absent: the first page.", nonNegative: true},
	},
	reflect.TypeFor[events.ContextReply](): {
		"version":  {doc: "Schema version of the reply."},
		"block":    {doc: "The reference-only preamble, the summary and an end marker, ready to send as one message; empty while the conversation has not been compacted (first page only)."},
		"summary":  {doc: "The summary alone (inside block)."},
		"up_to":    {doc: "The last transcript message id the summary covers (0: none)."},
		"messages": {doc: "The stored messages after the summary's boundary, oldest first, tool calls and results intact."},
		"tokens":   {doc: "An estimate of the whole context (characters / 4), on the first page."},
		"last_id":  {doc: "With more: the id to ask after (after_id) for the next page."},
		"more":     {doc: "More messages follow: ask again with after_id = last_id."},
		"error":    {doc: "Set when the service failed: the platform sends its own history instead."},
	},
	reflect.TypeFor[events.ContextMessage](): {
		"id":      {doc: "The message's id in the store (increasing)."},
		"turn_id": {doc: "The turn the message belongs to."},
	},
}

// typeNames are the event types' names, inputs first.
func typeNames() []string {
	var out []string
	for _, t := range allTypes() {
		out = append(out, string(t))
	}
	return out
}

const envelopeDoc = "The envelope every event shares (JSON, UTF-8). Readers ignore unknown fields and refuse: a key twice in one object, a key spelled otherwise than its field (names are case-sensitive), invalid UTF-8 or a lone surrogate escape, a control character in an id, an unknown type, a newer version, a timestamp outside the clock window."

// typeDocs are the event types' summaries.
var typeDocs = map[events.Type]string{
	events.TypeTurnStarted:       "The user sent a message: the injector answers with the memory block to prepend to the turn's prompt (to payload.reply_to and on ENGRAM_OUT).",
	events.TypeTurnEnded:         "The turn is complete: the extractor stores its transcript, judges the memories injected into it and extracts new ones.",
	events.TypeSessionIdle:       "The session has been quiet: the consolidator brings memory up to date with it.",
	events.TypeTokensReported:    "The conversation's context size after a turn: past a threshold the compactor summarises older messages.",
	events.TypeInjectionReady:    "The memory block of a turn, the answer to its turn_started.",
	events.TypeMemoryChanged:     "Memories a worker, the memory tool, an import or an undo changed. Without a session for a project-level edit.",
	events.TypeConsolidationDone: "A consolidation pass over a session ended.",
	events.TypeCompactionDone:    "A conversation's older messages were summarised.",
}
