// Package extract is the extractor worker: on every turn_ended it stores the
// turn's transcript, asks the model — in one schema-constrained call per
// span of turns — which of the memories injected into those turns were used,
// wrong or ignored, and what the turns established, applies that feedback
// (it drives the ranking prior), writes the new memories, marks memories
// attached to changed paths stale, embeds what is new and publishes
// memory_changed.
//
// # Spans
//
// AppendTranscript is idempotent per turn id. Extraction then runs for the
// span from the oldest turn not yet extracted to the newest, holding the
// session's lease ("extract", renewed while the model works, shorter than
// the consumer's ack wait). A turn that ends while another replica holds the
// lease is stored and retried with the runner's backoff (Result.Busy,
// ErrBusy, 1 s doubling), not acknowledged: the holder looks for new turns after it lets go and
// extracts them as its next span, so turns that queue up cost one model
// call per span, not one per turn, and the retry finds its turn done and is
// acknowledged without work. If the holder dies, the retry (or the holder's
// own redelivered event) extracts everything pending. Acknowledging a busy
// turn at once, as before, lost turns when the holder died after its own
// event had been acknowledged as busy by another replica (redelivered while
// the holder still worked, e.g. across a NATS restart that its in-progress
// heartbeats could not reach): the chaos suite (internal/chaos) found it. A
// redelivered event whose turn is already covered finds nothing to do.
//
// Which turns are done is kept in the store's processed records (consumer
// "extractor.turn", key "<len(session)>:<session>:<turn>"): the contract has
// no per-session marker besides the consolidation cursor, which belongs to
// the consolidator. Done turns form a prefix of the session, so the span
// start is found by walking back from the newest turn to the first done one
// over a window of messages (Config.ScanWindow, widened x8 as needed).
//
// # Effects exactly once
//
// A span's writes are guarded by a record of the span (its first and last
// message ids); a turn's feedback by a record written just before the
// verdicts are applied (at most once: never twice); the injection records
// are read without being consumed (GetInjection), so a crash anywhere
// before the span is done finds them again, and when it is done they are
// kept an hour more (KeepInjection), not deleted: a turn_started
// redelivered after that (its injection_ready publish failed in a NATS
// outage) is still answered with the block its verdicts were applied to
// (internal/inject, "One block per turn"), and what was judged can be read
// back (the chaos suite does). memory_changed carries an id derived from the span, so a redone
// span's publication is dropped by the stream's duplicate window. Memories
// are digest-keyed, so even a write repeated after a crash between the
// write and its record reinforces rather than duplicates.
//
// # What the model sees
//
// Render: USER / ASSISTANT lines, assistant text capped at 2,000 characters,
// tool calls by name, failed tool results with 600 characters, successful
// ones without content, the whole cut to 24,000 characters keeping the tail;
// secrets redacted first. Spans under 24 characters are skipped (no call).
// Then the memories injected into the span's turns ("[id] (subkind) label")
// and up to 12 related memories (hybrid retrieval on the last 4,000
// characters, no expansion, confidence >= 0.25, "[id] (subkind)" and the
// first 200 characters of the first line), all neutralised. SystemPrompt
// spells out the one rule the product depends on: a rule the user states
// ("never use X", "always answer in Indonesian") is a user-asserted
// preference or decision of scope project or global, so that it becomes a
// standing instruction sent every turn.
//
// # Write rules
//
// At most 5 memories per reply; confidence clamped to [0.1, 1] (0.5 when
// missing); labels cut to 300 characters; at most 8 entities and paths;
// secrets redacted again from what the model wrote. "same" as a shown
// memory, or cosine >= 0.85 against one written earlier in the span,
// reinforces it instead of storing; "opposite" links a contradicts edge, only
// to ids the model was shown; global memories have no project (global
// within the session's tenant: every memory is written into the event's
// tenant); session memories always have reach "here"; with cross-project
// reach off (Config.CrossProject, ENGRAM_CROSS_PROJECT=false) every memory
// is written into its project with reach "here", whatever the model
// proposed, so that no conversation of one project (one end user, on a
// platform) can write a rule the tenant's other projects follow. Verdicts for ids that were not injected
// are dropped. A memory the model marks as stated by the user whose label
// shares no content word with the transcript (a small model copying the
// prompt's example, or inventing a rule) is kept as an inferred memory of
// confidence <= 0.4, so it never becomes a standing instruction; a rule the
// model translated into another language than the user's can be caught by
// this too (it is then recalled, not standing). New memories carry their vector when the embedder answered;
// otherwise RunBacklog embeds them (in batches) when it is back, which is
// also what makes the injector's recall ready again.
//
// # Failures
//
// Classify maps errors onto the runner: the model or the store unavailable
// (or the model missing) -> Unavailable (the runner waits and pauses
// pulling; ModelGate keeps it from pulling while Ollama is down), the
// project's token budget spent -> RetryAfter until it resets; an invalid
// reply after the repair attempt -> RetryAfter with a doubling delay, and
// after Config.MaxInvalid failures (counted in the store, so replicas and
// restarts agree) Permanent with the model's last reply in the reason: the
// span's turns are marked done, their transcript stays stored.
package extract
