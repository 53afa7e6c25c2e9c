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
// Nothing is built when memory is off for the project, auto-recall is off, or
// recall is not ready (memories are waiting for embeddings by the configured
// embedder: BM25-only hits are worse than nothing, because the agent cannot
// tell a thin result from a complete one). No block at all is sent when there
// is nothing to say and the graph holds no live memory.
//
// Every memory line is neutralised (memory.Neutralise) before it is rendered:
// memory text comes from tool output and repositories and is replayed into a
// privileged position. The ids injected are recorded per session and turn so
// that the extractor can ask, at turn end, whether each one helped.
package inject
