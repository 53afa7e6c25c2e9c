// Package isolation holds the tenant isolation property test: the one place
// where every read path that can show a memory to someone runs against the
// same random graphs, on every store backend.
//
// The property: for random graphs spread over several tenants that share
// project ids, session ids, texts and paths, with random scopes (session,
// project, global) and reaches (here, anywhere), and random queries, no
// memory of tenant A is ever
//
//   - in a memory block (inject.Compose, cross-project reach on and off),
//   - in a recall (memory.Retrieve with graph expansion, cross-project on
//     and off),
//   - in an answer of the `memory` MCP tool (recall of scope project and
//     all, timeline, neighbours, stats counts; and an id of A named by B's
//     caller, to read or to change, is "not found" and stays unchanged),
//   - or in an export (memio.Export)
//
// for tenant B; and what tenant A may see of its own (its projects' and its
// global memories) is there: its export holds every node it wrote, and the
// stats counts are exactly its project's and its global memories. An edge
// between two tenants is refused by the store.
//
// It uses pgregory.net/rapid rather than testing/quick: rapid draws
// structured values from generators with shrinking (a failure is reduced
// to a small graph and query before it is reported, and the failing case
// is saved and replayed), and it is maintained; testing/quick is frozen
// and only generates flat random values without shrinking. The number of
// cases is rapid's -rapid.checks (100 by default; RAPID_CHECKS too); each
// case seeds a graph and runs several queries on every surface. The test
// logs what it ran.
//
// The backends: SQLite always, Redis 8 standalone with
// ENGRAM_TEST_REDIS_URL and a Redis Cluster with ENGRAM_TEST_REDIS_CLUSTER.
package isolation
