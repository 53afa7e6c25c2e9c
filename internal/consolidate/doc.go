// Package consolidate is the consolidator worker: when a session goes quiet
// (session_idle, from the platform or the built-in idle detector) it goes
// back over the conversation and brings memory up to date with it, in a
// bounded pass in which the model walks the memory itself with tools and a
// runtime that counts keeps it from walking forever. Every change is
// journaled, listed by `engram memory history` and reversible with `engram
// memory undo PASS`.
//
// # Why a runtime that counts
//
// Each step's context is rebuilt from scratch (the model gets no chat
// history of its own calls), which keeps the prompt small and the pass
// resumable, but it also means a stuck model sees the same context again
// and has no way to notice it is stuck. The Ledger notices for it: it
// records every step (tool, argument key, a one-line summary, the counts)
// and chooses the directive of the next step, most specific first:
//
//	finished                       -> "The pass is over. Call nothing." (and no tools are offered)
//	steps >= budget (12)           -> "budget spent: call memory_done; nothing stored is lost"
//	a pending nudge (prose answer) -> its own journal, "only a tool call moves anything",
//	                                  and "this is the last prompt" once nudges reach the maximum (2)
//	recall blocked (3 in a row)    -> "inspection is over, decide" (and memory_recall is withdrawn)
//	the same call twice in a row   -> "the answer has not changed; do something different or finish"
//	otherwise                      -> the work directive, which leads with the way out (memory_done)
//
// and decides at each step's end: done -> stop; no tool called -> nudge,
// stop once the nudges exceed the maximum ("stuck"); otherwise stop one
// step past the budget ("budget"). The ledger is plain data, saved with the
// pass's journal after every step.
//
// # Every message is read, and the cursor says how far
//
// The session's consolidation cursor records how far the passes READ,
// never further: a pass reads a window of the oldest user and assistant
// messages after the cursor, and when it ends the cursor moves to the
// newest message it was shown. A backlog larger than one window (a long
// session, an outage, a platform that sends session_idle rarely) is read
// window by window, oldest first, by as many passes as it takes, all in one
// run of the idle event's handler (each pass bounded by its own ledger,
// journaled and undoable on its own); the event is acknowledged only when
// nothing is left after the cursor, or when a pass parks. A crash between
// two passes loses nothing: the finished passes moved the cursor, the next
// delivery begins the next pass there (or finishes the one cut off, from
// its journal). A run longer than the runner's handler timeout (15
// minutes) is cut off like a crash and the redelivery goes on; each such
// delivery counts toward the consumer's MaxDeliver (10), so a backlog the
// model needs more than ~2.5 hours for is dead-lettered part-way (`engram
// dlq replay` goes on from the cursor).
//
// The old rule, the cursor to the newest message of the session whatever
// the window held, and a window of the NEWEST 20 messages, meant that a
// 5,000-message session with one idle event showed the model messages
// 4,981-5,000 and marked the other 4,980 consolidated; and a model that
// answered in prose moved the cursor past everything it never acted on.
//
// A pass that ends stuck (prose only) or over budget has not consolidated
// its window, so the cursor stays, and the next pass reads the window again,
// with half as many messages as the failed one showed (a small model that
// cannot finish twenty messages may finish ten). After Attempts (3) such
// passes over one window, the last one's window is passed over all the
// same (verdict skipped): a model that never calls memory_done must not hold
// the session forever. The skip is said in the journal (`engram memory
// history`: "skipped: 3 passes over these messages ended without
// memory_done"), in consolidation_done (reason skipped), and in the
// metrics (engram_consolidation_passes_total{verdict="skipped"} and the
// messages it spanned); `engram consolidate -from N` reads them again. The
// attempt count lives in the pass's ledger, so a redelivery goes on
// counting where the last run stopped.
//
// # Every prompt fits the model's context
//
// Ollama cut a prompt longer than the model's context from its start,
// without an error: the instructions went first. Every call now sends the
// consolidation model's window as num_ctx (llm.Client.ContextLength:
// ENGRAM_CONSOLIDATE_CONTEXT_LENGTH, else the model's own from Ollama's
// /api/show up to 32,768, else 8,192) and num_predict (ReplyTokens, 512),
// and the client asks Ollama to refuse rather than cut. So every step's
// prompt is bounded by construction, in the client's own high estimate
// (llm.TokensUpperBound, llm.RequestTokens: ASCII characters / 3, any
// other character a token): the reply's room, the system text and
// instructions, the tool definitions and the framing (fixed), the stored
// memories listing (MemoryTokens) and the step's notes (NoteTokens: the
// digest, the last call's result, the directive and the cascade) take
// their share (BudgetFor), and the transcript window gets the rest: it
// holds as many of the oldest messages as fit (a first message longer
// than that is cut, and the cut marked "…"). Within the notes the
// directive and the digest's first line are never cut; the last call's
// result, the cascade listing and the digest's steps fit to what is left
// and say what they left out ("(3 more cut to fit the context)"). A window
// too small to leave MinTranscriptTokens for the transcript is refused: at
// start when it is set, else as an invalid request of the pass (the event
// is dead-lettered with the reason, and replayed once the setting is
// fixed).
//
// # One step
//
// The messages are: the system text and the pass instructions (Instructions:
// nobody is waiting, a question in the transcript is not addressed to the
// model, what is durable and what is passing, store without searching
// first, split a bundle pieces-first, forget dated facts whose date has
// passed, fold dated instances into a pattern, make a topic only when it is
// durable), the transcript window (the oldest messages after the cursor:
// at most 20 user and assistant messages, 4,000 characters each, 40,000 in
// all and what the context leaves, redacted and neutralised; it says when
// later messages wait for the next pass), and one trailing message:
// "[Now: <time>]", the memories stored for the project and user newest
// first within 512 tokens as "[f3] text (kind; valid from ..to;
// active|closed)", the ledger's digest, the last call's result (a recall's
// memories, the memory a near-duplicate resembles) and the directive, with
// the cascade listing when the last step revised or forgot a fact. One
// tool call is applied per step (further calls in the same reply are
// ignored and the step says so).
//
// Memories are named by short ids, [f1], [f2], ... in the order the pass
// first showed them (the Ledger keeps the mapping, saved with the journal,
// so it holds across steps, parks and crashes): small models copy "f3"
// reliably and garble 24 hex digits. The runtime maps a short id back; an
// id the pass never showed, or anything else (a stored id the model cannot
// have seen), is refused and the model told how memories are named. The
// model never sees a stored id.
//
// # The tools
//
// memory_recall (a query through memory.Retrieve in precise mode, a date
// range newest first, or the facts as of a day), memory_remember, _revise,
// _forget, _link, _unlink, _done. A date range reads the project's timeline
// in growing pages until it is past the range's start (or has the hits, or
// has read RangeScanMax memories), so an old range is found behind any
// number of newer memories up to that bound. Every tool writes at once, so
// a pass cut off anywhere has kept everything it decided; this is why a
// bundle is split by storing its pieces first and forgetting it last: a
// pass cut off in between leaves redundancy, never loss.
//
// remember refuses a fact memory already holds (the same text after
// lower-casing, collapsing whitespace and trimming trailing punctuation,
// among the 32 most recent facts of the project and the lexical channel's
// best matches) and holds a near-duplicate for review (cosine >= 0.85
// against the project's vectors, or a word overlap >= 0.5 against the 32
// most recent facts) unless the call repeats with confirm_similar.
// confirm_similar answers a hold: it is honoured only for a text
// (normalised as above) that an earlier step of the same pass held, kept
// in the Ledger (Held, saved with the journal, so it survives a park or a
// crash); set on a first call it is ignored, the fact is held as usual and
// the model is told that confirm_similar applies to a held fact.
//
// The word overlap works in any language. Words come from Unicode word
// segmentation (UAX #29, github.com/rivo/uniseg: maintained, no data to
// load, the standard's own rules), lower-cased; a run of Chinese or
// Japanese characters, written without spaces, gives its character
// bigrams. There is no stop list (the old one was English: "El usuario ama
// navegar" and "El usuario ama tejer" overlapped 0.60 and were held as
// duplicates; two Chinese facts were one "word" each and overlapped 0).
// Instead: when one fact's words are all in the other's (it restates the
// other with words added, "every Tuesday morning at the lake"), the share
// of shared terms decides; when words were replaced (sailing / knitting,
// Monday / Friday), each term is weighed by how rare it is among the
// project's recent facts (BM25's idf): the subject and function words that
// most facts share ("the user", "el usuario", "用户") weigh little, the
// replaced word much, so a replaced object keeps two facts apart in every
// language. A piece of a bundle (its words a strict part of the bundle's)
// is not held, or the split rule could not be followed.
//
// remember of a fact memory holds forgotten (an earlier pass forgot it) or
// closed (a revision replaced it) makes that memory live again ("restored
// [f3] ...: it had been forgotten", counted as restored; a closed one's
// replacement is listed for review) instead of reporting "stored" while it
// stays archived; undo puts it back as it was. A link to a topic that was
// forgotten (by a pass, or by the undo of the pass that made it) restores
// the topic first: no pass links to an archived node.
//
// revise closes the old fact (memory.Store Revise: superseded, valid-to
// set; an "as of" read still finds it). forget archives; it refuses what
// the user wrote or pinned. Facts are written with asserted-by user when
// the model says the user said it (said_by_user) and the fact shares a
// content word with the user's messages in the pass's window
// (memory.Grounded, the rule the extractor applies), else inferred; a
// said_by_user fact that shares none is inferred of confidence 0.4, never
// a standing instruction: a small model copying an example, inventing a
// rule or obeying text in an assistant reply or a tool result would
// otherwise write a rule into every later block in the user's name. The
// assistant's words do not count (an injection reaches them). link and
// unlink take a topic by name (created on first link, identified by its
// entity key) and a topic relation; unlink says whether an edge existed.
//
// Cascade review: after a revise or a forget, the next directive lists the
// live memories linked to the changed fact by any edge (about, caused_by,
// generalizes, ...) or sharing one of its entities, so that the model can
// revise what depended on it in the same pass.
//
// # Park, lease, outage
//
// The cursor moves when a pass ends (done, or skipped) to the newest
// message it read, through memory.Sessions AdvanceCursor, which never
// moves back; only an operator's `engram consolidate -from N` sets it back
// (SetCursor), after finishing any open pass.
// Before each step the pass asks whether a turn started since the idle
// event's last activity: StreamActivity reads the last turn_started of the
// session from ENGRAM_IN (a direct get; the stream keeps input events by
// age and every replica reads the same stream), so no replica has to see
// the event itself. A new turn parks the pass (its journal and ledger are
// saved with status parked) and the next idle resumes it, with the same
// ledger (its budget counts the whole pass) and its window read again from
// the pass's first message, so it also sees the messages stored since as
// far as the window reaches. An idle event older than the new turn does
// not resume it.
//
// Nor does a pass start while the session's latest turn_ended is still
// unacknowledged by the extractor (StreamActivity: its stream sequence
// above the extractor consumer's ack floor): the transcript lacks that
// turn, and consolidating what is stored would leave the rest of an ended
// session unconsolidated for good, since no later idle event comes. This
// happens whenever the extractor is behind the idle detector: after a model
// outage (both workers paused; the detector kept publishing), or a killed
// extractor whose events wait for their ack wait. The pass returns
// ErrTranscriptBehind, a transient error: the runner retries it with its
// backoff (1 s, doubling; over 10 deliveries the extractor may be about 8
// minutes behind).
//
// The pass holds the session's "consolidate" lease (renewed at a third of
// its TTL, at most half the consumer's ack wait): a second event for the
// same session returns Busy and is not acknowledged (ErrBusy, retried with
// the runner's backoff) until it finds the session free. Acknowledging it
// lost work: a holder that parks (a turn started after its own idle event)
// or dies leaves the newer idle event's activity unconsolidated, and the
// chaos suite found a killed pass's own redelivery meeting its stale lease.
// The retry after the holder let go resumes a parked pass or finds nothing
// after the cursor (Empty). A pass cut off by a model outage, a store outage, a
// lost lease or a crash is resumed from its journal by the next delivery
// (status running); the handler classifies the outage as Unavailable so
// the runner pauses instead of spending deliveries, and the project's
// daily token budget (llm.Client) delays it with RetryAfter. Every write is
// journaled before it is made, as pending (a new memory's id is chosen
// first), and settled after: a pass cut off in between leaves the entry
// pending ("cut off: may not have been applied" in the history), and undo
// looks at what is stored (a pending revise finds its replacement through
// the old fact's superseded-by). On a Redis cluster the journal lives on
// the project's primary and a memory's id entry on another: a call that
// created a memory is settled only once the store says its writes are on a
// replica with no failover since (callSettled, memory.Settle); after a
// failover its creations are written again as journaled (the store then
// finds a surviving memory by its digest, reinforces it and writes its
// id's entry again), not the call made again (a held near-duplicate would
// then be stored without review); replicas that do not acknowledge leave
// its entries pending and the pass waits (memory.ErrNotReplicated, a
// runner wait).
//
// consolidation_done reports the pass id, the messages it read (from) and
// the cursor after it (up_to), the counts (stored, revised, forgotten,
// linked, restored, duplicates refused, held for review), the steps, the
// verdict (reason: done, budget, stuck, skipped) and the model tokens; its
// event id derives from the pass id, so a pass finished twice publishes
// once. Every pass of a backlog publishes its own.
//
// # Journal and undo
//
// The journal (memory.Journal, in the store contract and both backends) is
// one record per pass: each change with the node before and after, the
// edge, and the model's one-line reason. Undo walks it newest first:
// restores what the pass forgot, reopens what it revised (the old fact
// written back as it was, the replacement archived, the supersedes edge
// closed), removes (archives) what it added, unlinks what it linked and
// relinks what it unlinked. A memory the pass added, or a revision it
// wrote, that a later turn has used since is kept, and so is the fact it
// replaced. A revision that a later pass revised again or forgot is kept
// too, with the fact it replaced closed ("revised again since by [Z]"):
// reopening the old fact would put it live beside the newer one. Every
// such case is reported with its reason. A topic the pass created is used
// by what links to it: a live edge to it that the pass did not make (a
// later pass's, the extractor's) keeps it. "Used" (for facts) is a useful
// count or an access count above the journal's: the extractor's verdict
// "used" on a later turn that was given it (wrong or ignored is not a use),
// or a Touch. A pass is undone once.
//
// # Measured
//
// BenchmarkPass, a 60-turn session (the first pass's window: 20 messages
// of ~260 and ~770 characters), 40 stored memories, the scripted server's
// token counts, the first pass of the run:
//
//	model                      steps/pass  prompt tokens/pass  completion tokens/pass
//	working (11 calls, done)   11          43,056              266
//	stuck (recalls only)       13          51,285              169
//
// About 3,900 prompt tokens a step, plus ~1,131 tokens of tool definitions
// (estimated; a real Ollama added ~1,116): the transcript window is most of
// it, which is why the window, not the step count, is the lever on a
// pass's cost. BenchmarkBacklog5000 (a 5,000-message session, one fact and
// memory_done a pass): 450 model calls for the 4,500 messages shown, 0.10
// calls and ~156 prompt tokens a message read; before, one run made 2
// calls, showed 20 messages and moved the cursor past all 5,000
// (docs/consolidation.md has the table).
//
// The context length matters: at the window (40,000 characters) a
// step could reach ~12,000 tokens, more than Ollama's default context, and
// Ollama then dropped the start of the prompt (the instructions) without
// an error; against the pinned Ollama the tiny model's steps were each cut
// to its 4,096-token context. Now every call sends num_ctx and the window
// is what the context leaves: about 3,150 tokens of the high estimate
// (~9,500 characters of English) in an 8,192-token window, ~27,700 in
// 32,768.
package consolidate
