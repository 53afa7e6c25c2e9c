// Package memory is Engram's memory graph: the model (nodes, edges and
// per-session records), the Store contract every backend implements, the
// rules shared by all backends (digest, reinforcement, feedback, decay,
// redaction) and hybrid retrieval on top of the contract.
//
// Backends live in sub-packages (memory/sqlite, memory/redis) and all run the
// conformance suite in memory/memorytest.
package memory
