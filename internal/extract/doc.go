// Package extract is the extractor worker: on every turn_ended it stores the
// turn's transcript, asks the model — in one schema-constrained call per
// span of turns — which of the memories injected into those turns were used,
// wrong or ignored, and what the turns established, applies that feedback
// (it drives the ranking prior), writes the new memories, marks memories
// attached to changed paths stale, embeds what is new and publishes
// memory_changed.
//
// # Two consumers: what waits for the model and what does not
//
// Storing a transcript needs no model; judging and extracting do. The
// extractor role therefore runs two durable consumers on turn_ended
// (pkg/events: ConsumerTranscript, whose ConsumerConfig.Role is the
// extractor, and ConsumerExtractor), each with its own runner:
//
//   - transcript (Handler.Store, Extractor.StoreTurn), gated on the store
//     only: appends the transcript (idempotent per turn id) and marks
//     memories on the turn's changed paths stale (memory_changed "stale");
//   - extractor (Handler.Handle, Extractor.ExtractTurn), gated on the
//     extraction model (ModelGate): appends the transcript if the first
//     consumer has not yet (the two run independently), then judges and
//     extracts every span not yet extracted.
//
// While Ollama is down the runner pauses the extractor consumer only
// (internal/runner: a failing gate stops the pulling), so a turn's
// messages are in the store at once: `engram context` (the context API),
// the compactor's estimate and `engram consolidate` see them. The
// turn_ended events wait in ENGRAM_IN for the extractor consumer (interest
// retention keeps an event until every consumer that receives it has
// acknowledged it); when the model is back they are delivered in stream
// order and the span rule below extracts the backlog oldest first, in
// spans, each effect exactly once.
//
// The alternative was one consumer whose handler stores the transcript,
// writes a durable "pending extraction" record and acknowledges, with a
// model-gated stage that drains pending records per session under a lease.
// It would free ENGRAM_IN of a long outage's events, but it needs what the
// stream already is: a durable, ordered, replicated queue of pending work
// with redelivery, backoff, dead letters, in-progress heartbeats and a
// lag that KEDA scales on. The store has no index of sessions with pending
// work (it would be a new contract method, two backends and a scan loop per
// replica), and the records would need their own tenant-keyed drain. With
// two consumers nothing new is kept anywhere: the pending work is the
// extractor consumer's unacknowledged events plus the turns without their
// done record, both already durable and shared by every replica. What it
// costs: an outage's turn_ended events stay in ENGRAM_IN until they are
// extracted, within its limits (a week, 1 GiB, 1,000 events per session
// and type: a session over that during an outage is refused at publish, as
// before); an event the stream drops at its age limit leaves its turn
// stored and pending, extracted by the session's next turn_ended (the span
// starts at the oldest turn not done). A turn that breaks the transcript
// rules is dead-lettered by both consumers, each on its own DLQ subject.
// Both write into the event's tenant (Turn.Tenant), as before. The idle
// detector reads turn_ended on a consumer of its own and is unaffected:
// during an outage it still publishes session_idle, which the consolidator
// (paused too) takes up when the model is back.
//
// After an outage the compactor waits for the transcript consumer
// (events.NewTranscriptLag): a summary needs the messages, not their
// extraction. The consolidator keeps waiting for the extractor
// (events.NewExtractorLag): its pass reviews the memories that extraction
// writes from the same turns and must have the last word over them, as it
// has whenever the model is up (extraction follows each turn within
// seconds; consolidation waits for the session to be idle). A pass run
// before the extraction could forget or revise a fact that the late
// extraction then writes back, and the extraction's memories of those
// turns would be reviewed by no pass. `engram consolidate` by hand does
// not wait: it reads the stored transcript.
//
// # Spans
//
// AppendTranscript is idempotent per turn id. Extraction then runs for the
// span from the oldest turn not yet extracted, holding the session's lease
// ("extract", renewed while the model works, shorter than the consumer's
// ack wait). A span holds at most Config.SpanTurns turns (8) and no more
// than fit Config.TranscriptChars rendered (at least one turn): a backlog —
// the turns stored during a model outage — is extracted oldest first in
// spans the model reads whole; one span of the whole backlog would have
// been cut at its head (Render keeps the tail) and its first turns marked
// done unread, and would have let a reply's 5 memories stand for all of
// them.
//
// A reply holds at most 5 memories (the schema's maxItems,
// Config.MaxMemories), so a span of 8 turns that each state a rule lost
// three of them (the probe of 2026-12-06: 14 of 20 rules stored after an
// outage, with no trace). A reply that is full (as many memories as it may
// hold) to a span of several turns is therefore not applied: the span is
// asked again in halves, down to a single turn, and the following spans
// hold as many turns as the last applied reply's density says fit one
// reply with room to spare (turns x (MaxMemories-1) / memories, at most
// SpanTurns; a reply with no memory resets it to SpanTurns). Measured with
// the demo model (one rule a turn): 20 turns queued during an outage, all
// 20 stored in 6 calls (8 turns: full, not applied; then spans of 4), where
// a call per turn takes 20 (TestDenseBacklogSpansShrinkToOneReply). The choice
// against the alternatives: asking the model again for "more" on the same
// span depends on a model that honours a list of what it already gave (a
// small model repeats its first five, as the demo does); a higher cap for
// user-stated rules does not bound anything (the ninth rule of a span of
// 9); spans of one turn would cost a call per turn during every catch-up.
// The cost is one wasted call per full span, and a single turn that states
// more than 5 memories still keeps only 5 (a span cannot be split below a
// turn). The holder extracts up to Config.MaxSpanLoops spans, lets go and
// takes the lease again for the rest. A turn that ends while another
// replica holds the lease is stored and retried with the runner's backoff
// (Result.Busy, ErrBusy, 1 s doubling), not acknowledged: the holder looks
// for new turns after it lets go and extracts them as its next span, so
// turns that queue up cost one model call per span, not one per turn, and
// the retry finds its turn done and is acknowledged without work. If the
// holder dies, the retry (or the holder's own redelivered event) extracts
// everything pending. Acknowledging a busy turn at once, as before, lost
// turns when the holder died after its own event had been acknowledged as
// busy by another replica (redelivered while the holder still worked, e.g.
// across a NATS restart that its in-progress heartbeats could not reach):
// the chaos suite (internal/chaos) found it. A redelivered event whose turn
// is already covered finds nothing to do.
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
// On a Redis cluster the span's record lives on its project's primary,
// which replicates asynchronously: a record that survived a failover means
// the project's writes before it did (a replica holds a prefix of its
// primary's writes), but not the writes a span made on another primary (a
// memory's id entry in the id index, written when it is created and again
// when it is reinforced; a global memory; another project's; a
// contradiction's edge copy). A span that wrote a memory therefore records
// itself only once the store says its writes are on a replica and no
// failover came since it began writing
// (memory.Replicated, memory.Settle); after a failover it is not recorded
// (memory.ErrFailedOver, a runner wait) and is extracted again, which
// writes what was lost, reinforces the rest and writes again the id
// entries of the memories it finds by digest
// (TestSpanWrittenAgainAfterAFailover). Replicas that do not acknowledge
// within a few attempts are waited for the same way (memory.ErrNotReplicated),
// and the span's next attempt waits for them even if it writes nothing
// (Extractor.unsettled). A span that wrote nothing waits for nothing, and
// neither does the SQLite store (one file, whose commits survive in
// order). The model is asked again when a span is extracted again, so what
// it writes the second time is likely, not certain, to be what was lost.
//
// The injection record can come after the turn's end: the injector answers
// the platform before it records (the answer is on the turn's critical
// path), and a store failover between the two holds the record back. A
// platform that names the block's ids in turn_ended (injected_node_ids)
// has the turn marked ("transcript.injected", before its transcript is
// appended, so a span that holds the turn finds the mark); a span with a
// marked turn and no record waits for it (ErrInjectionPending, a runner
// wait) up to Config.InjectionWait from the first span that found it
// missing (a processed record the store expires: the store's clock, not
// the platform's occurred_at). The ids themselves are
// not judged: the record is what the injector answered with (a platform
// could name any id), and a redelivered turn_started answers with it.
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
// At most 5 memories per reply (a full reply to several turns is asked
// again in halves: see Spans); confidence clamped to [0.1, 1] (0.5 when
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
// shares no content word with the user's messages of the span
// (memory.Grounded, shared with the consolidator; the assistant's replies
// and tool output do not count, an injection can fill them) — a small
// model copying the prompt's example, inventing a rule or obeying a tool
// result — is kept as an inferred memory of confidence <= 0.4, so it never
// becomes a standing instruction; a rule the
// model translated into another language than the user's can be caught by
// this too (it is then recalled, not standing). New memories carry their vector when the embedder answered;
// otherwise RunBacklog embeds them (in batches) when it is back, which is
// also what makes the injector's recall ready again.
//
// # Failures
//
// Classify maps errors onto the runner: the model or the store unavailable
// (or the model missing) -> Unavailable (the runner waits and pauses
// pulling; ModelGate keeps the extractor consumer from pulling while
// Ollama is down, the transcript consumer goes on), the
// project's token budget spent -> RetryAfter until it resets; an invalid
// reply after the repair attempt -> RetryAfter with a doubling delay, and
// after Config.MaxInvalid failures (counted in the store, so replicas and
// restarts agree) Permanent with the model's last reply in the reason: the
// span's turns are marked done, their transcript stays stored.
package extract
