// Package inject builds the memory block the platform prepends to a turn's
// engine prompt (never to the stored user message).
//
// A block has two parts. STANDING INSTRUCTIONS are the rules the user stated
// (preferences, decisions, patterns asserted by the user or pinned): they are
// selected by the store, never searched, and sent every turn, because a rule
// such as "never use tool X" shares no words with the question it governs.
// RECALLED CONTEXT comes from hybrid retrieval (memory.Retrieve): BM25 and
// vector channels fused by weighted reciprocal rank, anchor paths, one hop of
// graph expansion, a prior from feedback, recency, staleness and confidence.
//
// How many recalled lines a turn carries follows the question: hits under the
// minimum confidence and standing instructions are dropped, then hits are kept
// in rank order until one scores under RelativeFloor x the best (0.7), at most
// MaxRecalled (12); a ranking that reaches the ceiling without ever falling
// under the floor is a plateau — the ranker does not know — and only
// PlateauKeep (3) lines are kept.
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
// Every memory line is neutralised (memory.Neutralise) before it is rendered:
// memory text comes from tool output and repositories and is replayed into a
// privileged position. The ids injected are recorded per session and turn so
// that the extractor can ask, at turn end, whether each one helped.
//
// # How many lines a turn gets
//
// Measured with `engram bench inject -memories 10000 -lines` (package
// injectbench: 22 hand-written memories of a web-shop project among 9,978
// varied filler memories, the hashing embedder, SQLite). Every block carries
// the same 4 standing instructions (three project rules and one global
// rule); "recalled" is what the question added:
//
//	| turn                                                        | recalled | tokens |
//	|-------------------------------------------------------------|----------|--------|
//	| How should I add a new payment method to checkout?          | 3        | 343    |
//	| The Stripe webhook returns 400 signature verification ...   | 1        | 295    |
//	| Where do we store user sessions and how long do they last?  | 5        | 396    |
//	| Can you add search by brand to the product search?          | 2        | 328    |
//	| The e2e cart test is flaky again, what did we do last time? | 4        | 376    |
//	| How are prices represented in the cart?                     | 3        | 349    |
//	| Add a migration that indexes products by category           | 2        | 328    |
//	| Why is the CI docker build failing with heap out of memory? | 9        | 501    |
//	| How do I validate the body of the new reviews API route?    | 4        | 361    |
//	| Send a confirmation email when an order ships               | 9        | 518    |
//	| Make the product page load faster on mobile                 | 4        | 374    |
//	| Which package manager do I use to add date-fns?             | 1        | 283    |
//	| ok / thanks / yes                                           | 0        | 230    |
//	| continue                                                    | 0        | 230    |
//	| (a rich, specific question about the Stripe webhook)        | 1        | 295    |
//
// Ordinary questions get a median of 3.5 recalled lines (1 to 9).
// Content-free turns ("ok", "thanks", "yes", "continue": ContentFree) get
// none from text; in a session they get what is attached to its anchor
// paths, usually one line (TestAnchorPathsRecallForShortTurns). Before the
// ContentFree rule, "continue" (exactly 8 characters) ran the text channels
// and got 4 lines of noise. A specific question whose best hit stands far
// above the rest gets exactly one line: the relative floor at work. The two
// questions that get 9 share common words with many filler memories; the
// plateau detector fires only when the ceiling of 12 is reached.
//
// # Latency
//
// `engram bench inject` (turn_started published -> block received, through
// JetStream on the embedded server, hashing embedder) on the shared 2-core
// machine. Run-to-run spread is large there: the same binary measured p99
// 11.76, 18.55 and 20.82 ms at 100,000 Redis memories within 20 minutes,
// and p50 2.29 to 2.56 ms at 100,000 SQLite memories (1.92 to 2.51 earlier
// that day), so compare binaries in one sitting. 2026-11-30, 06:31-07:11, start of day (f2e637b) against
// now, one client (p50 / p99):
//
//	                    10k memories                  100k memories
//	SQLite, start       1.75 / 4.40, 1.96 / 5.75 ms   2.56 / 5.95, 2.29 / 5.24 ms
//	SQLite, now         1.56 / 3.74, 1.58 / 3.99 ms   2.37 / 5.11, 2.39 / 5.37 ms
//	Redis 8, start      9.45 / 15.67, 9.56 / 17.30    11.44 / 20.15 ms
//	Redis 8, now        6.85 / 14.54, 5.84 / 12.07    8.56 / 20.82, 5.90 / 11.76,
//	                                                  8.51 / 18.55 ms
//
// With 8 clients Redis at 100,000 went from 118 to 167-202 turns/s (p50
// 68 -> 41-50 ms), at 10,000 from 165 to 255-282; SQLite at 100,000 from
// 671-900 to 919-987.
//
// Where a SQLite turn goes at 100,000 memories (in process, p50): the
// vector walk 0.8 ms beside BM25 0.5 ms, then loading the candidates 0.2
// ms and the rest of ranking and rendering; a text turn about 1.6 ms. In
// the benchmark a content-free turn takes 0.55-0.65 ms end to end (the bus
// and the standing selection), a question 1.7-2.5 ms.
//
// On Redis a turn is bound by the server's one main thread and the two
// cores: the lexical channel reads postings and scores BM25 in Go (it was a
// Lua script holding the main thread for about 4.5 ms a query at 100,000),
// VSIM runs on Redis' own thread because it is sent as a plain command
// (from a script it held the main thread for about 2 ms), and the seeds'
// edges are read beside the candidates' load. Redis CPU per turn (in
// process, over the corpus turns) went from 7.3 to 5.0 ms; packing each node into one hash field earlier took the
// candidate load from 4.2 to 1.6 ms.
package inject
