// Engram's event contract: types and constants. Generated from the Go types of
// pkg/events by internal/contract (`engram contract`, or `go generate
// ./internal/contract`), with api/asyncapi.yaml: do not edit.

/** The envelope schema version this client writes and the newest it reads. */
export const SCHEMA_VERSION = 1;
/** The first subject token(s) of every Engram subject, unless configured. */
export const DEFAULT_PREFIX = "engram";
/** The longest id (event, tenant, project, session, turn), in UTF-8 bytes. */
export const MAX_ID_BYTES = 256;
/** The largest input event body ENGRAM_IN takes by default, in bytes. */
export const DEFAULT_MAX_EVENT_BYTES = 524288;
/** How long inject waits for the memory block by default (ms). */
export const DEFAULT_INJECT_TIMEOUT_MS = 1500;
/** How long context waits for each page by default (ms). */
export const DEFAULT_CONTEXT_TIMEOUT_MS = 5000;
/** No timestamp of an event is before this. */
export const EARLIEST_TIME = "2000-01-01T00:00:00Z";
/** How far ahead of the reader's clock a timestamp may be (ms). */
export const MAX_CLOCK_AHEAD_MS = 86400000;
/** The reply-inbox prefix of the default tenant's replies. */
export const DEFAULT_REPLY_PREFIX = "_INBOX.";
/** The first token of every named tenant's reply inbox. */
export const TENANT_INBOX_ROOT = "_INBOX_TENANT";
/** The first token of the inboxes of Engram's own processes. */
export const ENGRAM_INBOX_ROOT = "_INBOX_ENGRAM";
/** The queue group of the context service. */
export const CONTEXT_QUEUE = "engram-context";

/** The streams. */
export const STREAMS = { in: "ENGRAM_IN", out: "ENGRAM_OUT", dlq: "ENGRAM_DLQ" } as const;

/** Headers of published events and dead letters. */
export const HEADERS = {
  msgId: "Nats-Msg-Id",
  type: "Engram-Type",
  version: "Engram-Version",
  dlqReason: "Engram-Dlq-Reason",
  dlqConsumer: "Engram-Dlq-Consumer",
  dlqSubject: "Engram-Dlq-Subject",
  dlqStream: "Engram-Dlq-Stream",
  dlqSequence: "Engram-Dlq-Sequence",
  dlqDeliveries: "Engram-Dlq-Deliveries",
  dlqMsgId: "Engram-Dlq-Msg-Id",
  dlqTime: "Engram-Dlq-Time",
  dlqTruncated: "Engram-Dlq-Truncated",
} as const;

/** The input event types (a platform publishes them). */
export const INPUT_TYPES = ["turn_started", "turn_ended", "session_idle", "tokens_reported"] as const;
/** The output event types (Engram publishes them). */
export const OUTPUT_TYPES = ["injection_ready", "memory_changed", "consolidation_done", "compaction_done"] as const;
export type InputType = (typeof INPUT_TYPES)[number];
export type OutputType = (typeof OUTPUT_TYPES)[number];
export type EventType = InputType | OutputType;

/** Who wrote a message. */
export type Role = "user" | "assistant" | "tool";
export const ROLE_VALUES = ["user", "assistant", "tool"] as const;

/** The outcome of a tool call. */
export type ToolStatus = "ok" | "failed";
export const TOOL_STATUS_VALUES = ["ok", "failed"] as const;

/** What happened to a memory (a reader tolerates kinds it does not know). */
export type ChangeKind = "created" | "reinforced" | "updated" | "revised" | "superseded" | "archived" | "restored" | "linked" | "unlinked" | "feedback" | "stale" | (string & {});
export const CHANGE_KIND_VALUES = ["created", "reinforced", "updated", "revised", "superseded", "archived", "restored", "linked", "unlinked", "feedback", "stale"] as const;

/** Payload of turn_started. */
export interface TurnStarted {
  /** The user's words for this turn. */
  text: string;
  /** Repository-relative paths (forward slashes) the session works in; they anchor path-attached memories. No empty path. */
  paths?: string[];
  /** Display names of project ids, for the block's text. No empty key. */
  project_names?: Record<string, string>;
  /** Where the platform waits for the injection_ready: a core NATS subject in the tenant's reply inbox (_INBOX. for the default tenant unless configured, _INBOX_TENANT.<tenant token>. for a named tenant). The injector refuses (dead-letters) any other. */
  reply_to?: string;
  /** When the platform stops waiting. An injector that gets the event later neither replies nor records an injection. */
  reply_by?: string;
}

/** Payload of turn_ended. */
export interface TurnEnded {
  /** The turn's messages in order: the user's, the assistant's with their tool calls, the tool results. */
  messages: Message[];
  /** Repository-relative paths the turn modified (memories attached to them may be stale). No empty path. */
  changed_paths?: string[];
  /** Prompt size of the turn's last model call; 0: unknown. */
  input_tokens?: number;
  /** The node_ids of the injection_ready the turn's prompt carried, if any. The injector answers before it records the injection; with them the extractor waits for a record still being written (a minute at most from its first look), so the memories' feedback is not lost to a store failover between the two. No empty id. */
  injected_node_ids?: string[];
}

/** One message of a turn. */
export interface Message {
  /** Who wrote the message. */
  role: Role;
  /** The message's text. */
  content?: string;
  /** The tool calls of an assistant message. */
  tool_calls?: ToolCall[];
  /** The tool whose result a tool message carries. */
  tool_name?: string;
  /** The call a tool message answers. */
  tool_call_id?: string;
  /** The outcome of a tool call: required for a tool message. */
  tool_status?: ToolStatus;
  /** An assistant message's prompt tokens, if known. */
  tokens_in?: number;
  /** An assistant message's completion tokens, if known. */
  tokens_out?: number;
}

/** A tool call an assistant message made. */
export interface ToolCall {
  /** The call's id, as the model gave it. */
  id?: string;
  /** The tool called. */
  name: string;
  /** The arguments as the model wrote them (JSON text). */
  arguments?: string;
}

/** Payload of session_idle. */
export interface SessionIdle {
  /** When the session was last active. */
  last_activity: string;
}

/** Payload of tokens_reported. */
export interface TokensReported {
  /** The conversation within the session (an agent runtime may run sub-conversations); empty: the session's main conversation. */
  stack_id?: string;
  /** Prompt size of the last turn's model call; 0: unknown (the compactor then estimates the stored messages). */
  input_tokens?: number;
  /** The model's context window, if known (0: unknown). */
  context_window?: number;
  /** An automated conversation that is never compacted. */
  ephemeral?: boolean;
  /** Compact whatever the token count (an ephemeral conversation still is not). */
  force?: boolean;
}

/** Payload of injection_ready. */
export interface InjectionReady {
  /** The id of the turn_started event this answers. */
  in_reply_to: string;
  /** The text to prepend to the turn's prompt; empty: nothing to add. */
  block?: string;
  /** The memories the block carries: standing instructions first, then recalled context. */
  node_ids?: string[];
  /** The retrieval scores of node_ids, index for index (0 for a standing instruction); empty, or as long as node_ids. */
  scores?: number[];
}

/** Payload of memory_changed. */
export interface MemoryChanged {
  /** The memories that changed. */
  changes: Change[];
  /** The id of the event that led to the change, if any. */
  cause?: string;
}

/** One memory that changed. */
export interface Change {
  /** The memory's node id. */
  id: string;
  /** What happened to it. A reader must tolerate kinds it does not know. */
  kind: ChangeKind;
}

/** Payload of consolidation_done. */
export interface ConsolidationDone {
  /** The session's consolidation cursor after the pass: the newest message consolidated. */
  up_to?: number;
  /** The oldest message the pass read (0: none); up_to is the newest unless the pass is read again (reason stuck or budget with attempts left: the cursor stayed). */
  from?: number;
  /** Tool-call steps used. */
  steps?: number;
  /** Node ids written. */
  changed?: string[];
  /** Why the pass stopped: done, budget, stuck, or skipped (stuck or over budget on its last attempt: the cursor moved past the messages it read although they were not consolidated). */
  reason?: string;
  /** The id of the pass's journal (engram memory history / undo). */
  pass?: string;
  /** Memories stored. */
  stored?: number;
  /** Memories revised. */
  revised?: number;
  /** Memories forgotten. */
  forgotten?: number;
  /** Topic links made. */
  linked?: number;
  /** Duplicates refused. */
  duplicates?: number;
  /** Near-duplicates held for review. */
  held?: number;
  /** Forgotten or closed memories made live again. */
  restored?: number;
  /** Model prompt tokens the pass spent. */
  prompt_tokens?: number;
  /** Model completion tokens the pass spent. */
  completion_tokens?: number;
}

/** Payload of compaction_done. */
export interface CompactionDone {
  /** The conversation within the session; empty: the main one. */
  stack_id?: string;
  /** The last transcript message id the summary covers. */
  up_to?: number;
  /** The conversation's tokens before. */
  tokens_before?: number;
  /** The conversation's tokens after (an estimate). */
  tokens_after?: number;
}

/** Body of a context request (the tenant, project and session are in the subject). An empty body is the first page. */
export interface ContextRequest {
  /** When set, must be the subject's tenant; may be left out. */
  tenant_id?: string;
  /** Ask for the next page: messages with a larger id, no block. 0 or absent: the first page. */
  after_id?: number;
}

/** Body of a context reply. */
export interface ContextReply {
  /** Schema version of the reply. */
  version?: number;
  /** The reference-only preamble, the summary and an end marker, ready to send as one message; empty while the conversation has not been compacted (first page only). */
  block?: string;
  /** The summary alone (inside block). */
  summary?: string;
  /** The last transcript message id the summary covers (0: none). */
  up_to?: number;
  /** The stored messages after the summary's boundary, oldest first, tool calls and results intact. */
  messages?: ContextMessage[];
  /** An estimate of the whole context (characters / 4), on the first page. */
  tokens?: number;
  /** With more: the id to ask after (after_id) for the next page. */
  last_id?: number;
  /** More messages follow: ask again with after_id = last_id. */
  more?: boolean;
  /** Set when the service failed: the platform sends its own history instead. */
  error?: string;
}

/** A stored transcript message: a Message with its store id and turn id. */
export interface ContextMessage {
  /** The message's id in the store (increasing). */
  id?: number;
  /** The turn the message belongs to. */
  turn_id?: string;
  /** Who wrote the message. */
  role: Role;
  /** The message's text. */
  content?: string;
  /** The tool calls of an assistant message. */
  tool_calls?: ToolCall[];
  /** The tool whose result a tool message carries. */
  tool_name?: string;
  /** The call a tool message answers. */
  tool_call_id?: string;
  /** The outcome of a tool call: required for a tool message. */
  tool_status?: ToolStatus;
  /** An assistant message's prompt tokens, if known. */
  tokens_in?: number;
  /** An assistant message's completion tokens, if known. */
  tokens_out?: number;
}

/** The payload of each event type. */
export interface PayloadOf {
  turn_started: TurnStarted;
  turn_ended: TurnEnded;
  session_idle: SessionIdle;
  tokens_reported: TokensReported;
  injection_ready: InjectionReady;
  memory_changed: MemoryChanged;
  consolidation_done: ConsolidationDone;
  compaction_done: CompactionDone;
}

/** The envelope every event shares (JSON, UTF-8). Readers ignore unknown fields and refuse: a key twice in one object, a key spelled otherwise than its field (names are case-sensitive), invalid UTF-8 or a lone surrogate escape, a control character in an id, an unknown type, a newer version, a timestamp outside the clock window. */
export interface Envelope<T extends EventType = EventType> {
  /** Unique id of the event (a ULID-like 26-character Crockford base32 string from the Go and TypeScript clients; any id is accepted). Also the Nats-Msg-Id header: JetStream drops a second publish of the same id within the stream's duplicate window (two minutes). */
  id: string;
  /** The event type; also the third subject token. */
  type: T;
  /** Schema version of the envelope. A reader refuses a version newer than the one it knows; additive changes keep the version. */
  version: number;
  /** When the event happened (RFC 3339). Refused before 2000-01-01 and more than a day ahead of the reader's clock. */
  occurred_at: string;
  /** The tenant that owns the project. Absent or empty: the default tenant. Must be the subject's tenant token, decoded. */
  tenant_id?: string;
  /** The project (any characters). Must be the subject's project token, decoded. */
  project_id: string;
  /** The session (conversation). Required for every type but memory_changed. Must be the subject's session token, decoded. */
  session_id?: string;
  /** The turn: required for turn_started, turn_ended and injection_ready. */
  turn_id?: string;
  /** The typed body: its shape is the event type's (see each message). */
  payload: PayloadOf[T];
}

/** An event of any type, narrowed by its type. */
export type AnyEnvelope = { [T in EventType]: Envelope<T> }[EventType];

/** The JSON shape of a field, as the decoder checks it. */
export type Shape = "string" | "integer" | "number" | "boolean" | "time" | "object" | { ref: string } | { array: Shape } | { map: Shape };

/** The fields of each object of the contract and their shapes, in the Go types' order. */
export const SHAPES: Record<string, Record<string, Shape>> = {
  Envelope: { id: "string", type: "string", version: "integer", occurred_at: "time", tenant_id: "string", project_id: "string", session_id: "string", turn_id: "string", payload: "object" },
  TurnStarted: { text: "string", paths: { array: "string" }, project_names: { map: "string" }, reply_to: "string", reply_by: "time" },
  TurnEnded: { messages: { array: { ref: "Message" } }, changed_paths: { array: "string" }, input_tokens: "integer", injected_node_ids: { array: "string" } },
  Message: { role: "string", content: "string", tool_calls: { array: { ref: "ToolCall" } }, tool_name: "string", tool_call_id: "string", tool_status: "string", tokens_in: "integer", tokens_out: "integer" },
  ToolCall: { id: "string", name: "string", arguments: "string" },
  SessionIdle: { last_activity: "time" },
  TokensReported: { stack_id: "string", input_tokens: "integer", context_window: "integer", ephemeral: "boolean", force: "boolean" },
  InjectionReady: { in_reply_to: "string", block: "string", node_ids: { array: "string" }, scores: { array: "number" } },
  MemoryChanged: { changes: { array: { ref: "Change" } }, cause: "string" },
  Change: { id: "string", kind: "string" },
  ConsolidationDone: { up_to: "integer", from: "integer", steps: "integer", changed: { array: "string" }, reason: "string", pass: "string", stored: "integer", revised: "integer", forgotten: "integer", linked: "integer", duplicates: "integer", held: "integer", restored: "integer", prompt_tokens: "integer", completion_tokens: "integer" },
  CompactionDone: { stack_id: "string", up_to: "integer", tokens_before: "integer", tokens_after: "integer" },
  ContextRequest: { tenant_id: "string", after_id: "integer" },
  ContextReply: { version: "integer", block: "string", summary: "string", up_to: "integer", messages: { array: { ref: "ContextMessage" } }, tokens: "integer", last_id: "integer", more: "boolean", error: "string" },
  ContextMessage: { id: "integer", turn_id: "string", role: "string", content: "string", tool_calls: { array: { ref: "ToolCall" } }, tool_name: "string", tool_call_id: "string", tool_status: "string", tokens_in: "integer", tokens_out: "integer" },
};

/** The payload object of each event type. */
export const PAYLOAD_OBJECT: Record<EventType, string> = {
  turn_started: "TurnStarted",
  turn_ended: "TurnEnded",
  session_idle: "SessionIdle",
  tokens_reported: "TokensReported",
  injection_ready: "InjectionReady",
  memory_changed: "MemoryChanged",
  consolidation_done: "ConsolidationDone",
  compaction_done: "CompactionDone",
};

/** The JSON names of every field of the envelope and its payloads: a key that differs from one of them only in case is refused. */
export const KNOWN_FIELDS: readonly string[] = ["arguments", "block", "cause", "changed", "changed_paths", "changes", "completion_tokens", "content", "context_window", "duplicates", "ephemeral", "force", "forgotten", "from", "held", "id", "in_reply_to", "injected_node_ids", "input_tokens", "kind", "last_activity", "linked", "messages", "name", "node_ids", "occurred_at", "pass", "paths", "payload", "project_id", "project_names", "prompt_tokens", "reason", "reply_by", "reply_to", "restored", "revised", "role", "scores", "session_id", "stack_id", "steps", "stored", "tenant_id", "text", "tokens_after", "tokens_before", "tokens_in", "tokens_out", "tool_call_id", "tool_calls", "tool_name", "tool_status", "turn_id", "type", "up_to", "version"];

/** Objects whose keys are data (a map), not field names. */
export const MAP_FIELDS: readonly string[] = ["project_names"];
