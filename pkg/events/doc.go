// Package events is Engram's event contract: the envelope and typed payloads,
// the subjects, the JetStream streams and consumers, and a Go client for chat
// platforms. A platform in another language implements the same contract from
// this page, or from its machine-readable form: api/asyncapi.yaml (AsyncAPI
// 3) and the test vectors api/vectors.json, generated from these types by
// internal/contract (`engram contract`; a test fails when they disagree);
// clients/typescript is the TypeScript client.
//
// # Envelope
//
// Every event is one JSON object (schema version 1):
//
//	{
//	  "id":          "01JD3Z8Q4W6V2K9T0M5R7XBC1A", // unique; also the Nats-Msg-Id header
//	  "type":        "turn_started",
//	  "version":     1,
//	  "occurred_at": "2026-11-29T19:30:00.123Z",
//	  "tenant_id":   "acme",                       // optional: absent is the default tenant
//	  "project_id":  "acme/web",                   // any characters, <= 256 bytes
//	  "session_id":  "chat 42",                    // required except for memory_changed
//	  "turn_id":     "t-7",                        // turn_started, turn_ended, injection_ready
//	  "payload":     { ... }                       // required, an object, shape by type
//	}
//
// A tenant owns projects: the workers keep every record, and every memory
// (global ones too), within the event's tenant, so that a platform serving
// several customers from one Engram sets tenant_id on each customer's
// events. It is validated like the project id; an event without it is the
// default tenant's, as every event was before tenants. The tenant is also
// a token of every subject (below), and the two must agree: the bus's
// permissions vouch for the subject, so a tenant's credentials can only
// speak for their tenant. Output events carry the tenant of the event that
// caused them.
//
// Decode rejects malformed JSON, an unknown type, a newer schema version and
// a missing required field with an error wrapping ErrInvalidEvent; each bad
// field is a *FieldError naming it ("payload.messages[1].role: missing").
// Unknown fields are ignored, so producers may add fields without breaking
// older workers. New and the NewX constructors fill id, version and
// occurred-at.
//
// Decode is strict where two readers could disagree about one event:
//
//   - a key twice in one object, at any level ({"tenant_id":"a",
//     "tenant_id":"b"}: encoding/json keeps the last, a first-wins gateway
//     the first, and each would file the event under another tenant), and
//     a key that differs from a field's name only in case or escaping
//     ("TENANT_ID", "tenant_\u0069d": encoding/json matches struct fields
//     case-insensitively, a case-sensitive reader does not) are refused;
//     keys of payload.project_names are data, only their exact duplicates
//     are refused (CheckKeys);
//   - a control character (Unicode Cc: NUL, newline, DEL, C1) in an id
//     (event, tenant, project, session, turn) is refused: ids name keys,
//     files and log lines, which a NUL cuts and a newline forges;
//   - a timestamp (occurred_at, reply_by, last_activity) before
//     EarliestTime (2000-01-01) or more than MaxClockAhead (a day) ahead of
//     the reader's clock is refused: years 0001 and 9999 decode as valid
//     times and would sort first or never expire; a day is far more than
//     any clock skew, and an event replayed from the DLQ is in the past.
//
// Input types (platform -> Engram) and their payloads:
//
//	turn_started     TurnStarted     text*, paths, project_names {id: name}, reply_to, reply_by
//	turn_ended       TurnEnded       messages* [{role*: user|assistant|tool, content, tool_calls [{id,name*,arguments}],
//	                                  tool_name, tool_call_id, tool_status: ok|failed (* for tool)}], changed_paths, input_tokens,
//	                                  injected_node_ids (the node_ids of the block the prompt carried)
//	session_idle     SessionIdle     last_activity*
//	tokens_reported  TokensReported  stack_id, input_tokens (0: unknown), context_window, ephemeral, force
//
// Output types (Engram -> platforms):
//
//	injection_ready     InjectionReady     in_reply_to* (the turn_started id), block, node_ids, scores
//	memory_changed      MemoryChanged      changes* [{id*, kind*}], cause
//	consolidation_done  ConsolidationDone  up_to, from, steps, changed, reason, pass, stored, revised, forgotten,
//	                                       linked, duplicates, held, restored, prompt_tokens, completion_tokens
//	compaction_done     CompactionDone     stack_id, up_to, tokens_before, tokens_after
//
// (* required.)
//
// # Subjects
//
//	engram.in.<type>.<tenant>.<project>.<session>      -> stream ENGRAM_IN
//	engram.out.<type>.<tenant>.<project>[.<session>]   -> stream ENGRAM_OUT
//	engram.api.context.<tenant>.<project>.<session>    -> the context API (core NATS)
//	engram.dlq.<consumer>                              -> stream ENGRAM_DLQ
//
// The prefix "engram" is configurable (Subjects.Prefix, Topology.Prefix,
// WithPrefix). Tenant, project and session ids become tokens with
// EncodeToken: letters, digits and - _ : @ are kept, every other byte is %XX
// (upper-case hex), the empty id is "%". "acme/web" is "acme%2Fweb"; "chat
// 42" is "chat%2042"; the default tenant is "%", so a single-tenant
// platform's subjects read engram.in.turn_started.%.acme.chat-1. DecodeToken
// reverses it. Subjects.Parse reads a subject back.
//
// Why the tenant is a subject token, second after the type: NATS
// permissions are subject patterns, so only a subject that names the
// tenant lets the bus itself keep tenants apart. A tenant's platform
// credentials publish <prefix>.in.*.<tenant>.> and
// <prefix>.api.context.<tenant>.> and nothing else (internal/natsauth);
// every worker checks that the body names the subject's tenant, project
// and session (Subjects.Check; a mismatch is a dead letter with the
// reason). The type stays first so that a consumer filter per type
// (<prefix>.in.<type>.>) and ENGRAM_IN's subjects per type keep working;
// the tenant before the project because a tenant owns its projects. The
// default tenant's token "%" keeps a single-tenant deployment as it was:
// its platform uses the generated platform user and _INBOX.
//
// ENGRAM_IN stores only <prefix>.in.<type>.*.*.* of the four input types
// (Subjects.InStreams): a publish of an unknown type, an output type, a
// subject with a token too few or too many, or the form before tenants,
// matches no stream and the publisher gets an error, never a sequence for
// an event nobody would process. EnsureTopology migrates an ENGRAM_IN of
// <prefix>.in.> in place: the events already stored under the older form
// (<prefix>.in.<type>.<project>.<session>) stay, are delivered, and are
// taken as the default tenant's when their body names no tenant
// (Address.Legacy), else dead-lettered (the older subject vouches for no
// named tenant).
//
// # Headers
//
// Published events carry Nats-Msg-Id (the event id: JetStream drops a
// duplicate within the stream's duplicate window, two minutes by default),
// Engram-Type and Engram-Version. Dead letters carry the Engram-Dlq-* headers
// (HeaderDLQReason ...): reason, consumer, original subject, stream, stream
// sequence, deliveries, original Nats-Msg-Id and time; their body is the
// original body, or its first bytes with HeaderDLQTruncated (the original
// size) when the letter would exceed the server's maximum payload.
//
// # Streams and consumers
//
// DefaultTopology: ENGRAM_IN, ENGRAM_OUT (1 day, 256 MiB, oldest dropped),
// ENGRAM_DLQ (30 days, 256 MiB, full: refuses); file storage, one replica.
//
// ENGRAM_IN keeps an event only while some consumer still has to see it:
// interest retention, so an event goes once every consumer whose filter
// matches it has acked it (7 days and 1 GiB stay as outer bounds). For
// that every input type must have a consumer (Validate checks: interest
// retention drops an event nobody filters at publish); a second consumer
// on a type (the idle detector's) keeps the event until both acked. A
// consumer of a role that no worker runs keeps its events until one does
// (health.Inspect reports it). It refuses rather than drops (discard new):
// when full, and per subject (one event type of one session) past
// DefaultMaxMsgsPerSubject (1000) events, so that one busy session cannot
// fill it for everyone; its MaxMsgSize refuses events over MaxEventBytes
// (DefaultMaxEventBytes, 512 KiB, + MaxHeaderBytes), and the Client
// refuses them before sending (ErrEventTooLarge).
//
// On ENGRAM_IN, one durable pull consumer per worker role, explicit ack:
//
//	injector      turn_started     ack wait 10s,  max deliver 3
//	extractor     turn_ended       ack wait 1m,   max deliver 10
//	consolidator  session_idle     ack wait 2m,   max deliver 10
//	compactor     tokens_reported  ack wait 1m,   max deliver 10
//
// Max deliver is enforced by the worker runner (internal/runner), not the
// server: the JetStream consumers have MaxDeliver -1, so that a message
// whose dead letter cannot be stored yet (ENGRAM_DLQ full) is redelivered
// instead of leaving the consumer without a letter.
//
// EnsureTopology creates or updates all of it idempotently (at start and by
// `engram setup`) and migrates an older layout without losing an event: an
// ENGRAM_IN of limits retention is switched to interest only after every
// consumer exists (the server then drops what all of them acked and keeps
// the rest), a per-subject limit is applied only once no subject holds
// more (the server would delete the excess), and the subjects of the form
// before tenants become the input types' (above). A stream whose
// configuration is already the wanted one gets no update request; a
// connection that may not update a stream (the setup role and ENGRAM_DLQ)
// names it in EnsureOptions.Frozen and gets the pending change back in
// Ensured.NotApplied. Topology.Validate lists every problem at once.
//
// # Delivery semantics
//
// Delivery is at least once. Publish with the event id as Nats-Msg-Id (the
// Client does) so a retried publish is stored once; workers record processed
// event ids per consumer so a redelivery does not apply effects twice. A
// worker acks on success, retries a transient failure with backoff, and sends
// a message it cannot process (invalid, or failed on its last delivery) to
// ENGRAM_DLQ with the reason. While a worker's model or store is down it
// stops pulling: events wait in ENGRAM_IN, nothing is dropped.
//
// # A platform's turn
//
//	inj, err := client.Inject(ctx, ref, events.TurnStarted{Text: userText})
//	// err (ErrInjectTimeout or any other): run the turn without memory.
//	prompt := inj.Block + userText
//	... run the model ...
//	client.PublishTurnEnded(ctx, ref, events.TurnEnded{Messages: msgs, InjectedNodeIDs: inj.NodeIDs})
//	client.PublishTokensReported(ctx, ref, events.TokensReported{InputTokens: n})
//
// Inject publishes turn_started with reply_to set to a subject of its own
// (under one inbox per Client and tenant, the tenant's own, subscribed once
// with a wildcard on the tenant's first Inject and routed to the waiting
// call by its last token) and reply_by to
// its deadline (1.5 s by default), then waits for an injection_ready whose
// in_reply_to is the event id. The injector replies to reply_to
// (Client.Respond) and also publishes injection_ready on ENGRAM_OUT. A turn
// is never blocked by Engram for longer than the inject timeout. Keep one
// Client per connection for the process; Close ends its reply subscription.
//
// A reply goes only to an inbox of the event's tenant (CheckReplyFor):
// for the default tenant under one of the reply prefixes
// (DefaultReplyPrefix "_INBOX.", or WithReplyPrefixes; see
// CheckReplySubject), for a named tenant under its TenantInbox,
// "_INBOX_TENANT.<tenant token>." and nowhere else. Otherwise the injector
// dead-letters the event and Respond refuses it, because the injector's
// connection may publish where the platform may not (a KV bucket, another
// project's events, another tenant's inbox with this tenant's block). A
// tenant's platform connects with nats.CustomInboxPrefix(TenantInbox(t)):
// its credentials may subscribe there only, and JetStream acknowledges its
// publishes there. The Client picks the inbox of each call's tenant
// (Inject, Context), so one client can serve several tenants on a
// connection allowed to. A default-tenant platform that sets its own
// nats.CustomInboxPrefix must have it configured on the workers
// (ENGRAM_REPLY_PREFIXES); a configured prefix may not overlap the
// reserved _INBOX_TENANT and _INBOX_ENGRAM (Engram's own processes).
//
// # What a reader checks
//
// Decode refuses invalid UTF-8 and lone surrogate escapes in the raw bytes
// (the JSON decoder would make them U+FFFD, merging distinct ids), and
// Subjects.Check tells whether a subject's type, tenant, project and
// session tokens (decoded) are the body's: workers act on the body only
// when the subject, which the bus's permissions vouch for, says the same.
//
// # The context API
//
// Before each turn a platform asks what to send its model of the earlier
// turns, so that a compacted conversation is rebuilt from Engram's summary:
//
//	c, err := client.Context(ctx, events.Ref{ProjectID: p, SessionID: s})
//	// err (ErrContextUnavailable or any other): send the platform's own history.
//	// else: c.Block (if not empty) as one message, then c.Messages.
//
// It is core NATS request/reply, outside every stream: a request to
// <prefix>.api.context.<tenant>.<project>.<session> (Subjects.ContextAPI;
// body a ContextRequest, "{}" for the first page; a tenant_id in it must be
// the subject's) gets a ContextReply (JSON), sent only to a reply subject
// in the tenant's inbox:
//
//	{"version": 1, "block": "...", "summary": "...", "up_to": 41, "tokens": 9120,
//	 "messages": [{"id": 42, "turn_id": "t9", "role": "user", "content": "..."}, ...],
//	 "more": true, "last_id": 57}
//
// block is the reference-only preamble, the summary and an end marker (empty
// while the conversation has not been compacted); messages are the stored
// messages after the summary's boundary (up_to), oldest first, with tool
// calls and results intact. A reply never exceeds the connection's max
// payload: with more set, ask again with {"after_id": last_id} for the next
// messages (no block); Client.Context does so. A failed service answers
// {"error": "..."}. The compactor serves it (Client.ServeContext with a
// ContextFunc) in the queue group ContextQueue, so its replicas share the
// requests; no responder, or no answer within the context timeout (5 s,
// WithContextTimeout), is ErrContextUnavailable.
//
// Package eventstest starts an embedded server for tests.
package events
