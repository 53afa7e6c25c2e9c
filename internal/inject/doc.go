// Package inject builds the memory block the platform prepends to a turn's
// engine prompt (never to the stored user message).
//
// A block has two parts. STANDING INSTRUCTIONS are the rules the user stated
// (preferences, decisions, patterns asserted by the user or pinned): they are
// selected by the store, never searched, and sent every turn, because a rule
// such as "never use tool X" shares no words with the question it governs.
// RECALLED CONTEXT comes from hybrid retrieval (memory.Retrieve): BM25 on
// query-time stems with the label weighed twice and stop words at half
// weight, the vector channel (an embedding model's; the built-in hashing
// embedder's earns nothing and is not searched), pseudo-relevance feedback
// and the time channel (the lexical matches written within a span the
// question names, "last Saturday", "in May 2023"), each channel's scores
// taken over its best and weighted (Config.Ranking; the weights follow the
// embedder: RankingFor), anchor paths, one hop of graph expansion, the
// conversation around the leading hits (the turn after a question, the
// turn before a hit: memory.Conversations), a prior from feedback,
// recency, staleness and confidence. docs/retrieval.md is the reference.
//
// How many recalled lines a turn carries follows the question: hits under the
// minimum confidence and standing instructions are dropped, then hits are kept
// in rank order until one scores under RelativeFloor x the best (0.4), at most
// MaxRecalled (10); a ranking that reaches the ceiling without ever falling
// under the floor is a plateau — the ranker does not know — and only
// PlateauKeep (6) lines are kept. The fused score is a share of the best
// evidence (a hit found by BM25 at half the best hit's BM25 score and not
// by the other channels scores about half as much), so the floor reads a
// real gap; under reciprocal-rank fusion, used before, neighbouring ranks
// scored nearly alike (rank 27 still passed a 0.7 floor) and the ceiling
// decided every length.
//
// A line is dated (LineProvenance, LineText): its provenance names the kind
// of memory unless it is a plain observation and ends with the day it was
// written, and each relative time in its text is followed by the date it
// means from that day ("last Saturday (2023-05-20)", memory.DatedText).
//
// The block policy was chosen on both development sets (issue 32, `engram
// eval` of the sweep; 2026-12-06). The conversation shares flattened the
// top of a chat's ranking, so that 3 of 12 lines cut many LoCoMo blocks
// short: floor 0.5, ceiling 12, plateau 3 kept block recall 0.629 at 194
// tokens there and 0.851 at 215 on LongMemEval; floor 0.4, ceiling 10,
// plateau 6 keep 0.673 at 240 and 0.863 at 253 (floor 0.5 / 12 / 6: 0.664
// at 227 and 0.856 at 220; 0.4 / 12 / 6: 0.673 at 251 and 0.868 at 268;
// no plateau rule at 0.4 / 8: 0.697 at 283 and 0.865 at 263). It held in
// both halves of each set (odd and even questions: LoCoMo 0.609 -> 0.647
// and 0.650 -> 0.700, LongMemEval 0.887 -> 0.905 and 0.815 -> 0.821).
// Dating a line costs no token: "(2023-05-25)" is as long as the
// "(observation)" it replaces on most lines.
//
// # Why a line is there
//
// Request.Explain sets Block.Why (memory.BlockWhy): for every line the rule
// that admitted it (RuleStanding, RuleBest, RuleFloor, RulePlateau) and how
// retrieval scored it (memory.Why: each channel's rank, own score and
// share, the activations, the prior's parts), and every ranked candidate
// the policy cut with the rule that cut it (RuleUnderFloor, RulePlateau,
// RuleCeiling, RuleLowConfidence). Explain derives the rules with the same
// keep as Keep (TestExplainAgreesWithKeep holds them together over random
// rankings); memory.Retrieve computes the channels' part after ranking from
// the lists it fused, so the block is the same with or without it
// (TestExplainChangesNothing) and a caller that does not ask pays nothing.
// The handler asks on every turn and the record keeps it (ids and numbers:
// about 500 bytes a recalled line and 70 a cut candidate as JSON; a block
// of 3 lines and 1 cut records 2.3 kB instead of 1.2 kB): a turn is
// explained as it was answered, not
// by a ranking run again later over memory that has changed since — which
// is what the console's turns page shows.
//
// # Reply deadline
//
// A turn_started carries reply_by: when the platform stops waiting (the
// Go client sets it to its publish time plus its inject timeout, default
// 1.5 s, on its own clock; not occurred_at). The handler skips a turn it
// processes after that moment (logged "arrived after its reply deadline"):
// nobody waits for the answer, and an injection record for a block the
// turn never carried would mislead the extractor's verdicts. Turns
// published while a process starts wait in ENGRAM_IN, so the injector
// must be pulling well within that time: a process is ready before its
// SQLite store has loaded its memories, and the injector's store gate
// (app.ServingStoreGate) lets it answer from the memories loaded so far
// (standing instructions first) while the other workers wait for the
// whole graph. With 116,100 memories the process used to load everything
// before its workers started (14.9 s) and every turn of that time was
// skipped; see internal/app and pkg/memory/sqlite (Loading).
//
// # Floods
//
// A turn that is already late costs almost nothing, and one sender's
// backlog never comes before everyone else's turns (injectfx wires both
// into the runner): runner.WithDeadline(ReplyBy, Handler.Expired) lets
// the runner acknowledge a first delivery past its reply deadline as soon as
// it is pulled or while it waits, before any store read (Expired logs it
// like a late turn, with before_handler true; the handler still judges a
// late redelivery, which may have a recorded block to publish), and
// runner.WithFairness(0) holds the consumer's max ack pending
// (events.DefaultInjectorWindow, 16384 turns) and serves tenants, then
// projects, then sessions in turn. The issue measured 71% of other
// sessions' turns timing out under 50 sessions x 1,000 turn_started;
// BenchmarkFlood (injectfx) replays it on a whole process: see
// docs/reliability.md for the figures.
//
// # One block per turn
//
// The handler answers the waiting platform, then records the block
// (Record: memory.Injection, the text, ids, scores and the briefing flag,
// kept RecordTTL or until the extractor shortens it), then publishes
// injection_ready and lets the event be acknowledged. A delivery can fail
// after the answer (the injection_ready publish in a NATS outage, a store
// error) or lose its ack, and the event comes back. Composing it again
// could pick other memories (extracted meanwhile, or moved by feedback)
// and lose the first-turn directive (the briefing flag is taken), while
// the platform and ENGRAM_OUT (whose duplicate window drops the second
// injection_ready) hold the first block, and the extractor would judge the
// second. So the handler first reads the turn's record (Recorded, one read
// per turn: about 0.015 ms on SQLite and 0.065 ms on Redis, p50,
// BenchmarkRecorded) and answers a recorded turn with the recorded block;
// its injection_ready is published even after the reply deadline (the
// record exists, so the extractor judges that block, and ENGRAM_OUT must
// say so). Only a turn whose record write failed (logged "answered block
// not recorded") can be composed again: with no record of what the
// platform got, the redelivery's block is the one recorded and judged.
// A block without lines is recorded too, so that a redelivery does not
// answer with memories the first answer lacked; a project with memory or
// auto-recall off records nothing. A recorded turn whose injection_ready
// cannot be published waits for the bus (runner.Wait: handled again
// shortly, no delivery spent) instead of failing: the injector has three
// deliveries, and a stream leader's failover in a NATS cluster (5-9 s in
// the clustered chaos run) outlasted their backoff and dead-lettered
// answered turns (TestReadyPublishOutageSpendsNoDelivery).
//
// # Measured on real conversations
//
// `engram eval ../shared/eval/longmemeval-dev` (100 questions over 24,859
// rounds of real user-assistant conversations, the built-in hashing
// embedder, SQLite), against plain BM25 over the same nodes in the same run:
//
//	|                                   | R@1   | R@5   | R@10  | R@20  | block recall | tokens (mean / p95) |
//	|-----------------------------------|-------|-------|-------|-------|--------------|---------------------|
//	| plain BM25                        | 0.440 | 0.756 | 0.843 | 0.911 | top 5: 0.756 | 252 / 260           |
//	| before (RRF, lexical 0.8 / vector 1.2, floor 0.7, 190 chars) | 0.349 | 0.703 | 0.796 | 0.849 | 0.631 | 301 / 722 |
//	| vector weight 0 (RRF)             | 0.425 | 0.730 | 0.850 | 0.889 |              |                     |
//	| score fusion, vector 0.3          | 0.423 | 0.771 | 0.851 | 0.899 |              |                     |
//	| + feedback 0.5, no prior          | 0.448 | 0.781 | 0.852 | 0.904 |              |                     |
//	| + query-time stems                | 0.436 | 0.788 | 0.872 | 0.906 |              |                     |
//	| + prior 0.3, 140-char lines       | 0.431 | 0.788 | 0.872 | 0.906 | 0.807        | 229 / 482           |
//	| feedback on the shared words only, 130-char lines | 0.446 | 0.798 | 0.877 | 0.911 | 0.803 | 228 / 486 |
//	| + the label weighed twice (BM25F) | 0.441 | 0.808 | 0.897 | 0.933 | 0.825        | 221 / 450           |
//	| + the time channel 0.5            | 0.441 | 0.818 | 0.897 | 0.933 | 0.825        | 221 / 450           |
//	| + vector weight 0 (not searched)  | 0.441 | 0.828 | 0.904 | 0.931 | 0.825        | 207 / 366           |
//	| + feedback 0.3                    | 0.461 | 0.836 | 0.902 | 0.929 | 0.841        | 211 / 402           |
//	| + the word's own token 0.5 more (memory.ExactWeight) | 0.468 | 0.829 | 0.894 | 0.946 | 0.838 | 194 / 366 |
//	| + a common word's own token scores the candidates | 0.475 | 0.836 | 0.904 | 0.947 | 0.838 | 201 / 412 |
//	| + stop words at half weight (issue 32) | 0.483 | 0.838 | 0.904 | 0.947 | 0.846 | 198 / 412 |
//	| + the conversation around a hit | 0.483 | 0.843 | 0.900 | 0.940 | 0.851 | 215 / 412 |
//	| + dated lines, floor 0.4, ceiling 10, plateau 6 (now) | 0.483 | 0.843 | 0.900 | 0.940 | 0.863 | 253 / 414 |
//
// The same on LoCoMo-dev (602 questions over 1,923 turns of two people
// chatting over months; plain BM25 0.316 / 0.522 / 0.590 / 0.660): 0.319 /
// 0.539 / 0.600 / 0.680, block 0.525 at 191 tokens before issue 32, 0.357
// / 0.646 / 0.726 / 0.773, block 0.673 at 240 now (docs/retrieval.md has
// every step).
//
// Kept out: dropping stop words from the query (R@5 0.803 but R@1 0.404,
// R@10 0.869, MRR 0.732 against 0.754; at half weight, since issue 32,
// both sets gain); the whole prior (R@10 0.862: recency
// pushes the older of two dated facts down, and temporal questions ask
// about both); vector weight 0.5 (R@5 0.750). The block policy was chosen
// from the sweep (engram eval prints it): floor 0.5 and ceiling 12 give
// recall 0.807 at 4.7 lines, against 0.789 for ceiling 10 and 0.755 for
// floor 0.6; shorter lines cost no recall (recall counts memories) and
// bring the p95 under 500 tokens. The feedback channel first searched the
// question's terms plus the shared words; searching the shared words
// alone is better on every ranker metric and costs the Redis server one
// query of 8 terms instead of one of the question's terms plus 8, but
// its blocks run longer (p95 513 tokens at 140 characters), hence 130.
// The label thrice: R@5 0.821 but R@1 0.423 (under BM25's 0.440) and
// R@10 0.894. The time channel moved the temporal questions' R@5 from 0.793
// to 0.830 (BM25 0.774): "two months ago" lifted its answer from rank 7 to
// 3. Two of them stay out of reach ("a piece of jewelry last Saturday",
// answered by "a crystal chandelier from my aunt today"): no word is
// shared, and the channel picks from lexical matches; reaching them needs
// a date index over all memories.
//
// The last two rows are the lexical channel's stem families made
// explicit (memory.LexTerms). A query word used to be cut to its stem
// prefix and matched as a prefix only, one term with one idf from the
// summed document frequency of everything it prefixes: a rare word was
// diluted by its family's common members ("bus" by "business" and
// "buses"). Now the word's own token also counts, at memory.ExactWeight
// (0.5) times its own idf, as a search engine queries a stemmed field
// and an exact one together. And a common word (held by over a quarter of
// the memories) was left out altogether once the rarer words had found
// enough candidates; its family still is (the prefix expansions of "the"
// or "use" are noise: scoring them took R@1 to 0.393), but its own token
// now adds its small weight to the candidates found. With both, the
// temporal questions are at or above BM25 at every depth (R@1 / 5 / 10 /
// 20: 0.489 / 0.830 / 0.893 / 0.937 against 0.444 / 0.774 / 0.885 /
// 0.911), as are the multi-session ones (0.324 / 0.756 / 0.837 / 0.920
// against 0.237 / 0.583 / 0.708 / 0.865). One answer BM25 finds is
// still past 20th here: the bus ride of "which mode of transport did I
// use most recently, a bus or a train?" (8th for BM25), among the
// memories about buses. Restricting a family to the words of the same
// Snowball stem ("bus" no longer matching "business") reached it (17th)
// but put the question's train ride from 7th to 14th and cost R@10
// (0.900, temporal 0.874): kept out. With -store redis (whose BM25
// statistics are now summed over the scopes a query reads): R@1 / 5 / 10
// / 20 0.431 / 0.812 / 0.886 / 0.921 -> 0.456 / 0.819 / 0.909 / 0.934,
// block 0.822 at 214 / 442 tokens -> 0.823 at 208 / 454.
//
// A content-free turn — only acknowledgements and go-aheads such as "ok",
// "continue" or "yes please, go ahead" (ContentFree) — and any turn under
// MinQueryChars (8) characters run no text channel: their words match
// filler in memories. They still recall what is attached to the session's
// anchor paths.
//
// Nothing is built when memory is off for the project, auto-recall is off, or
// recall is not ready (memories of the project, or global ones, are waiting
// for embeddings by the configured embedder: BM25-only hits are worse than
// nothing, because the agent cannot tell a thin result from a complete one;
// another project's backlog does not count). No block at all is sent when there
// is nothing to say and the graph holds no live memory.
//
// A block is built within the turn's tenant (Request.Tenant, the event's
// tenant_id): standing instructions are the project's and its tenant's
// global ones, recall reads the project, the tenant's global memories and,
// with Config.CrossProject (ENGRAM_INJECT_CROSS_PROJECT, off when
// ENGRAM_CROSS_PROJECT is), the tenant's other projects' memories whose
// reach is anywhere. Nothing of another tenant is read, whatever its scope
// or reach (TestTenantMemoryStaysInItsTenant; package isolation holds it
// over random graphs).
//
// Every memory line is neutralised (memory.Neutralise) before it is rendered:
// memory text comes from tool output and repositories and is replayed into a
// privileged position. The ids injected are recorded per session and turn so
// that the extractor can ask, at turn end, whether each one helped.
//
// # How many lines a turn gets
//
// Measured with `engram bench inject -memories 10000 -lines` (package
// injectbench: 39 hand-written memories of a web-shop project, most
// questions meeting two to four related ones, among 9,961 varied filler
// memories, the hashing embedder, SQLite), with the defaults of issue 19
// (score fusion, stems, the label weighed twice, feedback 0.3, no hashing
// vectors, floor 0.5, 130-character lines; measured 2026-12-01 at the
// end of the second session). Every block carries the same 4 standing instructions
// (three project rules and one global rule); "recalled" is what the
// question added:
//
//	| turn                                                        | recalled | tokens |
//	|-------------------------------------------------------------|----------|--------|
//	| How should I add a new payment method to checkout?          | 3        | 368    |
//	| The Stripe webhook returns 400 signature verification ...   | 1        | 295    |
//	| Where do we store user sessions and how long do they last?  | 3        | 356    |
//	| Can you add search by brand to the product search?          | 3        | 361    |
//	| The e2e cart test is flaky again, what did we do last time? | 2        | 329    |
//	| How are prices represented in the cart?                     | 3        | 356    |
//	| Add a migration that indexes products by category           | 5        | 430    |
//	| Why is the CI docker build failing with heap out of memory? | 3        | 361    |
//	| How do I validate the body of the new reviews API route?    | 12       | 624    |
//	| Send a confirmation email when an order ships               | 3        | 365    |
//	| Make the product page load faster on mobile                 | 3        | 368    |
//	| Which package manager do I use to add date-fns?             | 1        | 291    |
//	| ok / thanks / yes                                           | 0        | 230    |
//	| continue                                                    | 0        | 230    |
//	| (a rich, specific question about the Stripe webhook)        | 1        | 295    |
//
// Ordinary questions get a median of 3 recalled lines (1 to 12; before
// issue 19: 3, 1 to 8). "How are prices represented in the cart?" fell
// from 8 lines to 3. "How do I validate the body of the new reviews API
// route?" is the one long block (12, the ceiling): its words ("body",
// "new", "route", "validate") are common in the filler, so many hits score
// above half the best; which of them are filler was not examined.
// TestCorpusRecall still holds both stores to every question
// recalling a memory written for it, and two thirds having one as the
// first line. Content-free turns ("ok", "thanks", "yes", "continue":
// ContentFree) get nothing from text; in a session they get what is
// attached to its anchor paths, usually one line
// (TestAnchorPathsRecallForShortTurns). Real conversations, not this
// corpus, decide the policy: see "Measured on real conversations" above.
//
// Before the lexical candidates were scored for the vector channel
// (memory.VectorScorer; same 22 seeds as then, 2026-11-30), only 5 of the
// 11 questions with an answer recalled it: the approximate vector search
// on hashing vectors missed the answers (one at cosine 0.44 left out of a
// top 60 that ended at 0.20) and returned filler, which the prose
// profile's vector weight (1.2 against 0.8) put above the lexical match.
// The questions then got a median of 3.5 lines (1 to 9), mostly filler.
//
// # Latency
//
// `engram bench inject` (turn_started published -> block received, through
// JetStream on the embedded server, hashing embedder, 3,000 turns) on the
// shared 2-core machine, whose speed drifts by a third within an hour, so
// binaries are compared in one sitting.
//
// The targets are latencies of a turn as one conversation sees it, so they
// are read from the one-client rows: at 100,000 memories, SQLite p50 <= 2
// ms and p99 <= 10 ms, Redis p99 <= 15 ms. With 8 clients on 2 cores the
// benchmark (the clients, NATS, the injector and, on Redis, the server)
// uses both cores and the latency is queueing: about clients / throughput
// (8 / 2,100 turns/s = 3.8 ms on SQLite, 8 / 480 = 17 ms on Redis). Those
// rows measure throughput.
//
// 2026-12-05, the exact-word lexical channel (memory.ExactWeight; a common
// word's own token scores the documents that can still be among the
// best) against the code before it ("main", 2d828a7) and before issue 19
// ("start", dcbe7d8), one client, 1,000 turns, alternating, p50 / p99 ms,
// process CPU per turn (Redis: + server CPU):
//
//	SQLite 100k  start  1.95 / 4.72  2.47    2.06 / 4.29  2.54
//	             main   1.28 / 4.09  1.59    1.85 / 4.79  2.25
//	             now    1.84 / 5.15  2.30    1.78 / 4.45  2.20
//	Redis 100k   start  6.39 / 13.35 3.93+4.73   7.40 / 16.65 4.79+5.40
//	             main   5.17 / 13.80 3.75+2.32   5.92 / 13.50 4.40+2.55
//	             now    5.17 / 12.01 3.54+2.42   5.52 / 13.36 3.76+2.55
//
// Within the bound (no more than 20% over "start" at p50 and p99)
// on both stores. The first version scored every document a common word
// holds (38,600 of the 51,800 postings a turn read on this corpus): p50
// 1.48-1.75 ms against main's 1.14-1.30 in the same sitting; scoring only
// the documents marked in a bit set, then only those that can still be
// among the best (BenchmarkLexIndex p50 0.40 -> 0.27 ms, main 0.19),
// brought it back within the machine's noise.
//
// 2026-11-30 23:54 - 2026-12-01 00:03, the code of 2026-12-01 (the lexical
// candidates scored for the vector channel, the larger seeded corpus), on
// this session's machine, which ran the same code about 2.2 times as fast
// as the previous sessions' (BenchmarkLexIndex CPU p50 0.145 ms against
// 0.314; the SQLite turn's process CPU 1.0-1.2 ms against 2.2-3.0; the
// code at the end of the previous session, ffa0216, measured 0.87 / 1.62
// and 1.03 / 2.19 ms on SQLite and 3.43 / 6.70, 3.45 / 6.52 on Redis at
// 100,000 here), in the order run, p50 / p99 ms and turns/s:
//
//	                 1 client                      8 clients
//	SQLite 100k      1.23 / 2.46   870/s           4.01 / 13.30   1,856/s
//	Redis 100k       3.65 / 6.98   306/s           17.21 / 27.25  504/s
//	SQLite 10k       0.65 / 1.58   1,593/s         2.59 / 8.06    2,797/s
//	Redis 10k        3.10 / 5.65   363/s           15.48 / 25.86  550/s
//	SQLite 100k      0.97 / 1.89   1,097/s         3.63 / 9.73    2,078/s
//	Redis 100k       3.60 / 6.96   309/s           18.68 / 29.66  459/s
//
// All three targets were met in every one-client run at 100,000 of this
// session, over all the binaries measured: 14 on SQLite (p50 0.87-1.23
// ms, p99 1.62-2.46 ms) and 8 on Redis (p99 5.83-6.98 ms). The first SQLite run above
// met a slow spell of the machine (process CPU 1.41 ms a turn against
// 1.11 in the second). Block size over the corpus at 100,000 memories:
// median 267 tokens, p95 308 (Redis) to 327 (SQLite); at 10,000, 272 and
// 437. Process CPU per turn (1 client / 8 clients): SQLite 100k 1.11-1.41 /
// 0.94-1.04 ms; Redis 100k 1.87-1.95 / 1.37-1.44 ms plus the server's
// 2.67-2.75 / 2.12-2.38 ms.
//
// Scoring the leading lexical candidates for the vector channel costs
// little: alternating binaries on SQLite at 100,000, 8 clients, process
// CPU per turn 0.83 and 0.82 ms with it against 0.83 without (with all 60
// candidates instead of the leading 20: 0.87-0.98 ms, the cache misses of
// the id look-ups and the vectors; the 20 changed no line of the corpus'
// blocks); on Redis (one more pipelined round trip, about 20 VEMB) one
// client 3.59 / 6.52 ms against 3.57 / 6.80 without.
//
// 2026-11-30, 18:39-20:24, the code at the start of that session
// ("before", 014610b) against its end ("now": the Redis lexical channel
// shares its posting budget by the cube of each term's weight and reads
// 800 instead of 1,200 postings on this corpus; small vector sets are
// searched on Redis' main thread; "now+GC" also has the benchmark collect
// the seeding's garbage before measuring), one client, p50 / p99 ms, in
// the order run:
//
//	Redis 100k, before    7.65 / 15.56   6.48 / 12.89   7.35 / 13.87   6.02 / 11.63   7.37 / 15.33
//	Redis 100k, now       7.82 / 16.35   5.98 / 11.26
//	Redis 100k, now+GC    6.99 / 13.68   6.40 / 12.99
//	SQLite 100k, before   2.29 / 5.95    2.00 / 4.92
//	SQLite 100k, now      2.04 / 4.96    1.94 / 5.26    1.94 / 5.60    1.86 / 5.33   2.18 / 6.28
//	SQLite 100k, now+GC   1.78 / 4.80    2.38 / 6.55
//	Redis 10k, now        5.08 / 9.43
//	SQLite 10k, now       1.00 / 2.08
//
// Redis' medians went 7.35 -> 6.69 ms at p50 (0.91) and 13.87 -> 13.34
// at p99 (0.96); latencies moved with the machine more than with the
// code, so the change is read from CPU: Redis server CPU per turn with 8
// clients 4.53-5.00 ms before (median 4.85), 3.67-4.38 now (4.24, 0.87);
// 8-client throughput 197-221 turns/s before (median 198), 215-271 now
// (232, 1.17); at 10,000 memories 392 turns/s (265 the session before).
// The SQLite path did not change (its rows differ by noise alone: p50
// 1.78-2.38 ms). Against the targets at 100,000: Redis p99 <= 15 ms was
// met in three runs of four (three of five before), SQLite p50 <= 2 ms in
// five of nine, SQLite p99 <= 10 ms in all.
//
// What changed:
//   - Redis 8.0 starts a thread for every VSIM not sent NOTHREAD (one
//     clone3 per search). A turn searches three vector sets (the
//     project's, the global memories', other projects'); the small ones
//     cost more in that thread than in the search. Serial Vector calls on
//     the 100k graph, Redis CPU per call in alternating rounds: 2.98 /
//     3.25 / 3.05 -> 2.47 / 2.77 / 2.71 ms. The project's own set stays
//     threaded: sending it NOTHREAD too saved another 0.45 ms of server CPU
//     per turn but held the main thread, and the turn's p50 rose by 0.7 ms.
//   - The lexical budget: see package redis (TestLexicalQuality measures
//     the quality on natural text; the top 10 and 24 of exact BM25 are
//     kept as well as before with 10% fewer postings there, a third fewer
//     on this corpus, where most budget went to "the", "to" and "in").
//   - Tried and dropped: loading nodes with one script per project instead
//     of a pipelined HMGET per node (the Lua calls cost the server as much
//     as the commands did, about 5 us a node; no gain); a smaller VSIM EF
//     (EF 80 for 68 neighbours: 0.35 ms less server CPU per turn, no
//     latency gain, lower recall).
//
// 2026-11-30, 16:48-17:38, the code at the start of that session ("before",
// c9cf779) against its end ("now": the SQLite BM25 index scores a term with
// one live posting list in one pass, the Redis store caches id -> project
// in a map the garbage collector does not scan and sorts only the leading
// lexical candidates, the runner keeps long-lived handler workers; the
// first two SQLite runs of "now" are without the one-pass BM25 term), one
// client, p50 / p99 ms, in the order run:
//
//	SQLite 100k, before   2.05 / 5.39   2.41 / 6.08   2.13 / 5.19
//	SQLite 100k, now      2.30 / 6.63   1.80 / 4.28   2.24 / 5.24   1.84 / 4.01   1.88 / 4.42
//	Redis 100k, before    8.74 / 20.21  7.56 / 17.00
//	Redis 100k, now      10.31 / 22.33  7.91 / 16.12  8.71 / 20.80
//	SQLite 10k, now       1.38 / 3.12
//	Redis 10k, now        6.20 / 15.94
//
// SQLite's median p50 went 2.13 -> 1.88 ms (0.88) and its median p99 5.39
// -> 4.42 (0.82); p50 <= 2 ms was met in three runs of five, against none
// of three before. Redis did not move beyond the noise: p99 <= 15 ms was
// not met (16.1-22.3 ms). The same binary's CPU per turn moved by a third
// between runs (SQLite 2.24 and 3.00 ms), so the changes were judged by
// profiles and alternating micro-benchmarks instead: BenchmarkLexIndex CPU
// p50 0.351 -> 0.314 ms; on a Redis turn, in the process' CPU profile, the
// id cache's lookups and garbage collection about 5% less (Go CPU per turn
// 5.38/5.56/4.53 -> 5.17/4.70/4.27 ms in alternating runs), sorting the
// lexical candidates 5.0% -> 2.5%, stack growth 5.2% -> 3.8%. With 8
// clients SQLite served 770-1,375 turns/s and Redis 159-205; at 10,000,
// 1,374 and 265.
//
// Where a Redis turn's CPU goes (serial, one call at a time, Redis server
// CPU from /proc): the vector channel 2.3-2.9 ms (three VSIMs, nearly all
// of it the project's 100,000-element set), the lexical channel 1.3 ms,
// the candidate load 0.37 ms; the process spends about as much again. On
// the hashing embedder's vectors the VSIM at EF 120 finds 72% of the 60
// neighbours an EF 3,000 search finds (these vectors have no neighbourhood
// structure; see package vecindex), so a smaller EF, the one lever left on
// the largest cost, would trade away recall that is already low here.
//
// Tried and dropped in that session: loading the candidates of the channel
// that finishes first while the other still runs (the load overlaps the
// slower channel): no gain on SQLite, and on Redis, whose turn is bound by
// the two cores' CPU rather than by waiting, one more round trip made it
// slightly slower (p50 7.89/8.24/8.68 -> 7.89/9.45/8.71 ms in process).
// Turning the garbage collector off did not change the Redis p99 either
// (21.79/15.99 against 21.44/21.38 ms): the tail is not collection pauses.
//
// 2026-11-30, 14:24-15:03, the code
// at the end of the previous session ("before", 04ee766) against this one
// ("now": contradiction hints, the project registry from a copy, the hop's
// neighbours loaded beside the candidates), one client, p50 / p99 ms:
//
//	Redis 100k, before    9.46 / 24.09   9.70 / 22.03
//	Redis 100k, now       7.67 / 16.17   8.10 / 19.17   8.11 / 18.64
//	SQLite 100k, before   2.11 / 4.73    2.49 / 6.51
//	SQLite 100k, now      2.39 / 6.18    2.15 / 6.00
//	SQLite 10k, now       1.60 / 4.31
//	Redis 10k, now        6.59 / 15.09
//
// The machine ran slow that afternoon: the "before" binary had measured
// 6.6-8.2 / 14.6-19.9 ms on Redis and 1.85-2.25 ms p50 on SQLite at midday
// (11:39-12:32, the table below). In
// the same sitting Redis went 9.58 -> 8.10 ms at the median p50 and 23.1 ->
// 18.6 ms at the median p99; SQLite's turn path did not change (its store
// has no hints) and moved within the noise. Against the targets at
// 100,000: Redis p99 <= 15 ms and SQLite p50 <= 2 ms were not met in this
// sitting (SQLite p99 <= 10 ms was). With 8 clients Redis served 164-192
// turns/s (before 166-186), SQLite 860-1,072; at 10,000, 191 and 1,440.
//
// What changed on Redis, all round trips on the turn's path:
//   - contradictions: the edges of the 32 best hits (64 HGETALLs, a round
//     trip after ranking) were read on every turn to find contradicts edges
//     that are rare. Each project now keeps the set of its nodes that are an
//     end of one (memory.ContradictionHints); it is asked beside the
//     candidate load (one SMISMEMBER per project) and the edges are read
//     only when two hits are in it. Alternating in-process binaries, five
//     pairs: p50 median 8.41 -> 7.62 ms, p99 16.65 -> 15.07;
//   - cross-project recall read the project registry (SMEMBERS) before each
//     channel's first read; it now uses a copy at most a second old;
//   - the hop's neighbours outside the candidates are loaded as soon as the
//     seeds' edges are known, beside the candidate load instead of after it
//     (the benchmark's graph never needs that load; real graphs do).
//
// Tried and dropped in that session: a BM25 index layout keeping a
// document's generation and length, and a posting's frequency and score,
// side by side (one cache line per posting instead of two) ran slower in
// BenchmarkLexIndex (p50 0.46-0.50 ms against 0.41-0.44); GOGC=200 saved
// about 6% of the process' CPU per turn on Redis but did not show on the
// wall clock, and costs memory where the SQLite vector index lives in the
// heap; VSIM with count and EF 80 instead of 98 / 120 was about 17% faster
// but narrows the headroom for filtered-out neighbours.
//
// The previous session (2026-11-30, 11:39-12:32, from 077a21d to 04ee766:
// Redis vector sets in int8, the live check only for turns without lines,
// standing instructions in one round trip on Redis), one client, p50 / p99:
//
//	Redis 100k, before   10.16 / 27.31   7.43 / 15.58   7.65 / 16.75
//	Redis 100k, after     6.73 / 14.63   7.05 / 17.08   8.16 / 19.88   6.61 / 15.62   6.90 / 17.63
//	SQLite 100k, before   2.31 / 7.68    1.76 / 4.56
//	SQLite 100k, after    1.98 / 4.92    1.93 / 4.79    1.85 / 4.40    2.25 / 5.81
//	SQLite 10k, after     1.43 / 3.78
//	Redis 10k, after      6.15 / 13.38
//
// There SQLite p50 <= 2 ms was met in three runs of four (median 1.96 ms)
// and Redis p99 <= 15 ms in one of five (median 17.1 ms).
//
// The wall clock hides most of what changed on Redis; CPU per turn shows
// it. On the same 100,000-node graph, alternating binaries (in process, over
// the corpus turns): Redis CPU 6.23-6.42 ms a turn before int8 vectors,
// 5.09-6.00 after;
// a VSIM alone (count 98, EF 120) p50 2.45 ms on float32, 1.63 on int8. A
// turn costs about 10 ms of CPU in all, half in Redis (VSIM about 1.6, the
// lexical postings about 1.5, the candidate load 0.6) and half in the
// process (the Redis client about 1.5, NATS about 1); on two cores, a p99
// twice the p50 is contention: the spread is the same for every question
// of the corpus (p90 about 1.4 x p50 for each), not a few slow queries.
// GOMAXPROCS=1, to leave a core to Redis,
// helped a harness without NATS (p99 18.3 and 16.2 ms against 22.9 and
// 21.2) but not the benchmark, whose process also runs the NATS server and
// the client: 19.32 and 19.71 ms against 17.63 in the same sitting.
//
// Tried on Redis and dropped, because the server paid more than the client
// saved: loading candidates by one Lua script per project instead of one
// HMGET per node (client CPU 0.70 -> 0.61 ms per load of 110 nodes, server
// 0.47 -> 0.81 ms: Lua copies each packed node once more), and reading
// edges the same way (server 0.13 -> 0.23 ms).
//
// Session 2026-11-30 (second), from c50e6a9 to 077a21d: SQLite 100k p50 /
// p99 went from 2.89 / 7.17, 2.55 / 6.16, 1.85 / 4.08 to 1.49-2.13 /
// 3.10-6.03 (six runs, median p50 1.98), Redis from 10.26 / 27.98 and
// 9.50 / 21.49 to 6.84-9.86 / 14.57-24.97 (median p99 16.4); the process'
// CPU per turn at SQLite 100,000 from 3.50 and 3.19 ms to 2.56 and 2.29.
//
// What made the difference in that session, by where a SQLite question
// spent its time:
//   - the bus: the benchmark's injector connects in process, as under
//     `engram serve`, not over TCP; the handler yields right after replying
//     so that the reply leaves before the turn's record is written;
//   - the vector walk, bound by memory latency: a bitset for the visited
//     set, layer-0 links in one slab, every line of a code touched ahead;
//   - BM25: the best documents handed over best first, so the channel
//     stops at the first it cannot take; ties broken on an id key in the
//     gate;
//   - the rest of ranking: the calling goroutine runs the last channel
//     itself; candidates copied in batches and scored as light records,
//     Hits made only for the few that can make the cut;
//   - the briefing flag, asked on every turn, answered from memory after a
//     session's first turn (on Redis a round trip less).
//
// Where a SQLite question goes at 100,000 memories, end to end (p50, traced
// once): publish to the injector 0.24 ms, the channels 0.9-1.25 ms (the
// vector walk beside BM25), the rest of ranking 0.35-0.4 ms, the block
// 0.15 ms, the reply to the client 0.26-0.33 ms. A content-free turn takes
// about 0.6 ms.
//
// On Redis a turn is bound by the server's one main thread and the two
// cores: the lexical channel reads postings and scores BM25 in Go (it was a
// Lua script holding the main thread for about 4.5 ms a query at 100,000),
// VSIM runs on Redis' own thread because it is sent as a plain command
// (from a script it held the main thread for about 2 ms), and the seeds'
// edges are read beside the candidates' load. Redis CPU per turn (in
// process, over the corpus turns) went from 7.3 to 5.0 ms in the first
// session of 2026-11-30; packing each node into one hash field earlier took
// the candidate load from 4.2 to 1.6 ms. Block sizes on Redis vary by a few
// tokens between runs (median 311-339): VSIM's graph is built with Redis'
// own random levels, so a reseeded store recalls slightly differently.
package inject
