// Package compact is the compactor worker: on tokens_reported it decides
// whether a conversation's context has grown too large and, if so, replaces
// its older messages with a structured summary; it also builds the context
// platforms send next (the context API, events.Client.Context), which is
// how the summary reaches the model.
//
// Why: a long agent conversation outgrows its model's context window, and
// cutting old messages loses the task. A summary written as a handoff (the
// active task in the user's words first, then what was done, what is in
// progress, what failed with the exact errors, what was decided) lets the
// next context window continue the work. It is reference material, never
// instructions: the block that carries it says so, because a model that
// reads "the user asked X" in a summary would otherwise do X again.
//
// # Trigger
//
// Effective tokens are the report's input tokens, or, when it reports 0, an
// estimate (characters / 4, Tokens) of the stored messages since the latest
// summary's boundary. Compact when they reach Config.ThresholdFor: a
// per-project or default Threshold, absolute tokens or a fraction of the
// report's context window (default 0.5; 64,000 tokens without a window).
// Ephemeral reports are skipped, forced ones skip the threshold (not the
// ephemeral guard). Ephemerality is a flag on the event, so the compactor
// remembers it per session: an ephemeral report of the main conversation
// records the session (a processed record "compactor.ephemeral", kept
// Config.RecordTTL), and a forced report of a recorded session (engram
// compact sends no flag) fails with ErrEphemeral, which the runner
// dead-letters with that reason. A report with a stack id is skipped: the transcript
// Engram stores (turn_ended, appended by the extractor) is the session's
// main conversation, so a sub-conversation's count says nothing about it.
//
// A reported count under the threshold is answered without reading the
// store. A decision made from the stored transcript (an estimate under the
// threshold, or nothing to split) waits while a turn_ended of the session
// is not yet stored by the extractor role's transcript consumer (events.NewTranscriptLag,
// ErrTranscriptBehind, retried with the runner's backoff): the transcript lacks that turn,
// and after a model outage the session's last report would otherwise be
// answered before its turns were stored, and the session never compacted. One compaction per session at a time: the session lease "compact" is held
// (memory.HoldLease, renewed every TTL/3, at most half the consumer's ack
// wait) while the model works. A report that finds it held is not
// acknowledged (Busy, ErrBusy: retried with the runner's backoff): a
// holder killed mid-run leaves its lease to expire and covers nothing, and
// the report may be the session's last. After a live holder it is Covered. A report made before the
// latest summary was saved describes the context before it (it waited in
// the stream, e.g. during an outage) and is Covered, unless forced; this
// compares the platform's occurred-at with the store's clock, so a platform
// clock far behind only delays the next compaction.
//
// # Split
//
// Split: the messages since the boundary; nothing to do with keep-recent (6)
// or fewer. The boundary walks back from count - keep-recent to the nearest
// user message (nothing to do if that is the first message), then moves
// before any assistant message whose tool calls are answered after it, so
// the platform never sends a tool result without its call. Results pair
// with calls by position, not by id alone (Pair): a result answers the
// nearest earlier assistant message with an unanswered call of its id,
// else the first unanswered call of the nearest one (preferring its own
// turn). Platforms that number calls per turn ("c1" in every turn) or send
// no ids work; pairing by id alone paired every "c1" result with the
// first turn's call and moved the boundary to message 1. The latest
// message is never covered.
//
// # Summary
//
// Render serialises the covered messages with role labels (assistant tool
// calls with their arguments cut to 1,200 characters, each tool result with
// its call id and status, a missing status said to be an interrupted call,
// and a call that no result answers (Pair) marked "(interrupted: no
// result)": the split never separates a call from its results, so such a
// call's result was never stored);
// long content keeps its head and tail (messages 6,000 + 1,500 characters,
// tool results 4,000 + 1,500). Each message is neutralised
// (memory.NeutraliseText: tags, template tokens, role markers, overrides
// and exfiltrating links defanged, lines and code kept), so that a tool
// result cannot steer the summariser; it was redacted when it was stored
// (memory.PrepareMessages), and copies of the block's markers are defused,
// so that neither a message nor a summary can close the block early or pose
// as its preamble. The summary is neutralised too, when the reply is cleaned
// and again when the block is rendered.
//
// Prompt: the first compaction sends SystemPrompt, the Template and the
// transcript; later ones send the previous summary (the summary alone,
// never the block around it) and only the messages after its boundary, with
// instructions to update rather than restart (keep what holds, continue the
// numbered completed actions, move finished work out of in progress and
// answered questions to resolved, refresh the active task). The prompt
// states a length target (Words: half of what the summary replaces, and a
// quarter under its budget) and asks for the template's headings in
// English whatever the language of the content. Summaries never nest:
// Clean strips an echoed preamble or markers and anything before the first
// section from the reply, and the new summary replaces the old one. No
// tools, temperature 0.3, num_predict = OutputBudget: 20% of the covered
// tokens plus the previous summary's tokens (an update rewrites the whole
// summary; without them, once a summary outgrew 20% of the new messages,
// every update was cut off and the cut text replaced the summary), between
// 2,000 and 12,000 and at most a third of the window left after the
// instructions.
//
// # Windows and steps
//
// Every prompt fits the summarize model's context window by construction.
// The window is llm.Client.ContextLength for the summarize role:
// ENGRAM_SUMMARIZE_CONTEXT_LENGTH, else the model's own from Ollama's
// /api/show (at most 32,768), else 8,192; the client sends it as num_ctx
// on every call with truncate=false, so Ollama refuses a prompt that does
// not fit (llm.ErrContextExceeded) rather than silently dropping its
// start, the oldest turns. A compaction whose messages do not fit one
// prompt is done in steps (planner): the oldest messages that fit are
// summarised, then the summary is updated with the next ones, each step's
// prompt (llm.RequestTokens, a high estimate) plus its reply budget at most
// the window. A step ends at a boundary (a user message no tool call pairs
// across) when one is at least halfway as far as the longest run that
// fits; a single turn larger than a step is cut inside (that step's
// summary is not saved). The summary after each step that ends at a
// boundary is checked and saved, so a refusal, a crash or the handler's
// timeout later keeps the progress and the retry continues from it (a
// report older than such a summary is not Covered while that summary left
// the context over the threshold). compaction_done is published once, for
// the whole compaction. A window that cannot hold the instructions, the
// previous summary, one message and a 256-token reply is ErrWindowTooSmall
// (permanent). Before: a forced compaction of 5,000 messages sent one
// 594,000-character prompt.
//
// # Checks
//
// A model reply is untrusted: Check decides whether it may replace
// anything. Refused (RefusedError, in this order): a reply cut off by the
// output limit (done_reason "length", llm.Response.CutOff: its end is
// missing), an empty one, one without a required section with content
// (RequiredSections: the active task, what the next context window
// resumes from; "ok", "Sure! Here is...", an answer to the user), one
// whose section of the template opens as a chat assistant's reply rather
// than a summary ("## Active task\nSure! Run make deploy.", "I'd be happy
// to help", "Here is the summary", "¡Claro! Aquí tienes el resumen",
// "好的，以下是摘要": CheckSaid, reason missing_section; the section's
// content is missing). An interjection opens a section legitimately when
// it quotes the user (a quoted opening, or the word is in the user's
// messages the summary covers: "Sure, go ahead and add the tests"); a
// meta sentence about the summary never does. Only the opening line of
// each section is read, so first-person handoff notes ("I'll write the
// migration next") are summaries. And one
// whose block is not smaller (characters / 4) than what it replaces: the
// covered messages plus the previous summary's block. The summary is
// measured in its block (Block, BlockTokens: the preamble, markers and end
// marker add about 140 tokens) because the block is what the context holds
// instead of the messages: counting the summary alone let a forced
// compaction of a short conversation grow the context (the probe of
// 2026-12-06, the README's demo: "compacted up to message 10: 347 -> 431
// tokens"). The first summary's length target leaves room for the frame. A
// compaction whose covered messages and previous block are no larger than
// the smallest block a summary makes (an active task of one word) is not
// attempted: Outcome TooSmall, no model call, no failure. The reply is redacted with memory.Redact (the
// prompt asks for [REDACTED] too). A refusal is a failed attempt (see
// Failures): the previous summary and the context stay as they were, the
// compactor logs "summary refused" with the reason, counts it
// (engram_compaction_refusals_total{reason}, Metrics), and the last
// attempt dead-letters the report with the reason, which `engram compact
// -wait` prints.
//
// The summary is saved with the id of the last message it covers and the
// tokens before and after (memory.Summary), then compaction_done is
// published with an id derived from the boundary. The two counts are
// measured differently: tokens_before is the effective count the trigger
// compared, i.e. the platform's reported prompt (its whole input: system
// prompt, memory block, tools and messages) or, when it reported 0, the
// characters / 4 estimate of the context the platform gets (the previous
// summary's block and the stored messages after its boundary, as the
// context API counts it); tokens_after is always an estimate (characters / 4) of the new
// block plus the kept messages, without the platform's system prompt or
// tools. Their difference therefore overstates the saving by the
// platform's fixed part of the prompt; the next tokens_reported gives the
// real new size. A record per boundary says it was published; a crash
// between the save and the publication is repaired by the next report that
// takes the lease (one at or over the threshold, or forced).
//
// # Failures
//
// Classify maps errors onto the runner: the model or the store unavailable
// (or the model missing) -> Unavailable (the runner waits and pauses
// pulling; ModelGate keeps it from pulling while Ollama or the summarize
// model is missing), the project's token budget spent -> RetryAfter until
// it resets; a failed attempt (a refused summary, a model error that is
// not an outage, and a summary call that timed out or got an HTTP 5xx
// while Ollama answers and has the model: the model gate passes then, so
// an Unavailable would have the runner redeliver at once until the report
// is dead-lettered) -> RetryAfter 1, 5, then 15 minutes (Config.Backoff,
// counted per boundary in the store's processed records, so replicas and
// restarts agree), and Permanent after Config.MaxFailures (4; at most the
// consumer's max deliver - 1): the report is dead-lettered with the
// reason, nothing is lost (the transcript stays; the next report tries
// again). An invalid request (a prompt over the window included) and a
// window too small for a summary call are Permanent. The runner sends
// InProgress while the model works, so a long summary call does not get
// its message redelivered.
//
// # Context
//
// Compactor.Context (an events.ContextFunc, served by compactfx with
// events.Client.ServeContext) returns Block (Preamble, the summary between
// SummaryOpen and SummaryClose, EndMarker) and the stored messages after
// the boundary, with their ids and turn ids. A platform sends the block,
// then those messages, then its own messages of turns Engram has not
// stored yet, then the new user message.
//
// # Measured
//
// BenchmarkConversation replays a scripted 500-turn coding conversation
// (about 600 tokens a turn: requests, file reads, edits, test runs, some
// failing) with a 2,000-token system prompt, a 128k context window (so the
// threshold is 64,000) and a scripted model that answers at once with a
// 1,500-token summary (go test -run '^$' -bench Conversation -benchtime 1x,
// 2 shared cores). 2026-12-06, medians of 3 runs side by side, before (main
// 7f88428: one call per compaction, num_ctx sized to the prompt) and after
// (the summarize model's window, 32,768 from the scripted /api/show, so a
// 64,000-token compaction takes 4 calls, each saved):
//
//	                                   SQLite           Redis 8
//	                                   before  after    before  after
//	tokens sent per turn, without      148,796 148,796  148,796 148,796  (last turn 299,114)
//	tokens sent per turn, with          34,130  34,130   34,130  34,130  (at most 64,375)
//	compactions                              4       4        4       4
//	summary calls per compaction             1       4        1       4
//	overhead per compaction (no model)   42 ms   80 ms    68 ms   98 ms  read, plan, render, save, publish
//	a report under the threshold          5 µs    4 µs     7 µs    5 µs  no store access
//	building a context (the API's reads)  7 ms    5 ms     7 ms    5 ms  per turn, without NATS
//
// The overhead grows with the steps (a save and a request each); the
// model's time, seconds to minutes a call on a CPU, dwarfs it. Building a
// context is dominated by decoding the stored messages after the boundary
// (up to the threshold's worth of transcript).
package compact
