// Package redis is the Redis 8 backend of memory.Store, for the distributed
// deployment (several worker replicas sharing one memory graph). It works on
// a standalone server and on Redis Cluster through a go-redis
// UniversalClient, keeps no state a second replica would need, and passes
// the conformance suite (memory/memorytest) on both.
//
//	client := goredis.NewUniversalClient(&goredis.UniversalOptions{Addrs: addrs})
//	store, err := redis.New(client, redis.WithNamespace("engram"))
//
// Every rule that decides a stored value is memory's (PrepareNew, Reinforce,
// ApplyPatch, ApplyVerdict, MarkStale, Close, PrepareRevision, Visible,
// standing order, edge rules): this package only stores and indexes.
//
// # Redis 8 on the development machines
//
// Vector sets (VADD/VSIM) need Redis >= 8. Debian 12 ships 7.0, so
// scripts/redis8.sh fetches Debian 13's redis 8.0.2 with a private apt list
// into $ENGRAM_CACHE/redis8 (default ~/.cache/engram/redis8, outside the
// repository; the system's apt state is not touched) and runs it through
// trixie's own dynamic loader:
//
//	bash scripts/redis8.sh start      # standalone :6390, cluster :7001-7003
//	eval "$(bash scripts/redis8.sh env)"   # starts if needed, exports the test variables
//	go test ./pkg/memory/redis
//	bash scripts/redis8.sh stop
//
// Tests read ENGRAM_TEST_REDIS_URL (standalone) and ENGRAM_TEST_REDIS_CLUSTER
// (comma-separated cluster nodes); without them they skip, unless CI is set,
// when they fail. Each test store uses its own namespace (WithNamespace) on
// the shared server and drops it with DeleteNamespace.
//
// # Key layout
//
// Every key starts with the namespace, then the hash tag of the project it
// belongs to: {p:<project>} (or {h:<sha256>} for a project id holding a
// brace), {g} for global memories, of the default tenant; for any other
// tenant {t:<sha256 of its space>}, one per project of the tenant and one
// for its global memories. The store names a tenant's project by its
// space: the project id itself for the default tenant (so keys written
// before tenants keep their names), 0xFF tenant 0xFF project otherwise
// (0xFF never occurs in the valid UTF-8 that ids must be, so the name is
// unambiguous: FuzzSpace); the id index, the registry and the vis fields
// hold spaces where they held project ids, and a packed node carries its
// tenant after its other fields, only when it is not the default one (a
// default-tenant node packs byte for byte as before). All keys of one
// project therefore hash to one cluster slot, and projects spread over
// the shards. With K = "<ns>:{p:<project>}:":
//
//	K n:<id>          hash: the node's attributes packed in one field (pk, see packNode:
//	                  a candidate load reads one field per node), the vector as a
//	                  little-endian float32 blob (vec); hashes written before packing
//	                  hold one short field per attribute and are still read, and
//	                  rewritten packed on their next write. A binary from before
//	                  packing sees a packed node as missing: upgrade every replica
//	                  before the new ones write, and do not downgrade
//	K dg              hash: digest -> id (upsert matching within the project)
//	K all             zset: every node by updated-at (timeline, scan)
//	K lv              set: live nodes (HasLiveMemory)
//	K st              zset: standing-instruction candidates (memory.IsStanding) scored
//	                  in memory.CompareStanding order
//	K pe              zset: live nodes without a vector, by created-at (backlog)
//	K em:<model>      zset: live nodes embedded by model, by created-at
//	K models          set: the models used in the project
//	K v:<model>       vector set (VADD ... Q8 SETATTR {sc,ss,rc,ar,sb,vt,cf,sk}; a set
//	                  made float32, NOQUANT, by an earlier version keeps that, see vaddScript)
//	K t:<term>        zset: BM25 postings of a term (impact, tf, length packed in the score)
//	K th:<term>       string: the cached head of t:<term> (its first 128-1,024 postings
//	                  packed, see lexhead.go), kept a minute after it is built
//	K hh              hash: term -> "<head size> <lowest score in the head>" for the
//	                  cached heads (what the posting writers check to drop a head)
//	K terms           zset: the term dictionary (all scores 0, for ZRANGEBYLEX prefixes)
//	K dv              hash: the dictionary's versions: "#" and 3 hex digits of FNV-1a of
//	                  a term's bucket (its first 3 bytes; never the bytes, which would keep
//	                  short terms past an erasure) -> a random token of the last write that
//	                  added a term of the bucket to the dictionary or dropped one (lexdict.go:
//	                  the store caches prefix ranges and checks their buckets' versions);
//	                  absent for data from before; fields named by the bytes themselves,
//	                  written by builds of the rediscpu branch before the hash, are never
//	                  read again (a query reads the hashed field: a cache miss that refills)
//	                  and are not removed
//	K bm              hash: n documents, l total length (BM25 statistics)
//	K df              hash: term -> its document frequency (the length of t:<term>; no
//	                  field for an empty list), set by the posting scripts in the call
//	                  that changes the list, so that a query's document frequencies are
//	                  one HMGET per project instead of a ZCARD per list; read only at
//	                  store format 3 (format.go: replicas of earlier versions do not
//	                  keep it)
//	K cv:<session>    zset: the session's memories (conversation.go) scored by
//	                  memory.ConversationAt, each member the id encoded so that equal
//	                  scores order as memory.NaturalCompare does (naturalKey):
//	                  Adjacent (memory.Conversations) is a ZRANK and a ZRANGE per memory,
//	                  plain, in two pipelines; EnsureConversationIndex fills the sets of
//	                  scopes written before them (the bm hash's "cv" field marks a scope
//	                  complete)
//	K vis             hash: id -> the node's filter fields packed in one value, so the
//	                  channels judge a page of candidates with one HMGET
//	K pn              hash: id -> the node's head: its packed value without the body
//	                  (headCopy), written with the node in the same MULTI and removed with
//	                  it, so that a turn's candidate loads (GetHeads) are one HMGET per
//	                  project; read only at store format 2 (format.go: replicas of earlier
//	                  versions do not keep it)
//	K at:<term>       set: the project's nodes of reach anywhere that hold the term
//	                  (reach.go), written with the node in the same MULTI: what
//	                  another project's cross-project read takes instead of t:<term>,
//	                  with the members' scores from it; read only at store format 4
//	K va:<model>      vector set: the vectors of the project's nodes of reach anywhere
//	                  (as v:<model> holds them, same MULTI), which another project's
//	                  cross-project vector read searches instead of v:<model>; format 4
//	K pa:<path>       set: nodes attached to a path (ByPaths, MarkStale)
//	K eo:<id>         hash: out-edges of id (JSON; the primary copy)
//	K ei:<id>         hash: in-edges of id (JSON; a copy under the destination's project)
//	K cx              set: the project's nodes that are or were an end of a contradicts
//	                  edge, and "" once that list is complete (see hints.go): retrieval
//	                  reads edges for its contradiction check only when two hits are in it
//	K s:<session>:... per-session records (see sessions.go): messages (list), turns,
//	                  summaries, cursor, injections, briefing flag, leases; passat
//	                  (zset: the session's consolidation passes by start)
//	K ev:<consumer>   hash: processed events -> expiry
//	K pass            hash: consolidation pass id -> journal record (JSON; journal.go)
//	K passat          zset: the project's passes by start time (ms)
//
// A lease's name may not hold ':' nor be one of the other per-session
// suffixes (memory.CheckLeaseName), so that a session's keys are told
// from those of a session whose id starts like it and continues with ':'.
//
// Outside any project: <ns>:{r}:projects (the registry of spaces, for
// cross-project reads, which take the spaces of the filter's tenant only,
// and scans; another tenant's global space is registered too; recall reads it from a copy at most a second old, so a
// project first written by another replica joins cross-project recall
// within a second), <ns>:{r}:dims (model -> vector dimension) and
// <ns>:{r}:held (every space that holds a per-session or per-project
// record, registered by their writes, so that a tenant's erasure finds
// the spaces of a tenant whose keys' tags are hashes; see erase.go),
// <ns>:{r}:reach (the spaces that hold, or held, a node of reach anywhere:
// the only other projects a cross-project read searches from store format
// 4; reach.go), <ns>:{r}:format (the store's format, format.go: absent, which is 1, until
// `engram upgrade finish` raises it once no replica of an earlier version
// runs; back to 1 by `engram upgrade rollback`),
// <ns>:{i:<0..1023>}:ids (id -> project: Get by id finds the slot; the
// mapping never changes, so the store caches it, in a map without pointers
// that the garbage collector never scans: see idcache.go).
//
// # Retrieval channels
//
// Lexical is BM25 scored in Go from postings read on the project's slot,
// in three pipelined round trips (see Store.Lexical): the dictionary step
// prefix-expands the query's stem prefixes (memory.LexTerms) over the term
// dictionary (the prefix and up to 32 longer terms, and the query words'
// own tokens) and reads document frequencies (from prefix ranges the
// store caches, checked by their versions, and one HMGET of the df hash,
// at store format 3, or a ZCARD per list before it; a small script for a
// range not cached: lexdict.go); posting lists are read
// (from their cached heads: one MGET per project, see below) best impact first
// under a budget (whole when short, so small corpora
// and rare terms are exact; of a common term only the best postings make
// candidates, and the rarer of the common terms get the larger shares);
// the leading candidates get the rest of their score by ZMSCORE and their
// filter fields by one HMGET of the vis hash, judged by memory.Visible
// itself (within a Retrieve at store format 2 and later, their heads from
// the pn hash instead, kept for the candidate load: memory.HeadCache). The postings are scored as the SQLite store scores its index
// (lexscore.go): a query term's family summed and saturated once, with
// one idf from the documents holding any of it, its words' own tokens
// memory.ExactWeight more, stop words memory.StopWordWeight, and a common
// term (memory.CommonShare) left out once the rarer ones found enough.
// TestLexicalParityDev (ENGRAM_TEST_LEXICAL_PARITY=DIRs) compares the two
// stores on the development sets: read whole, every top 10 is the
// SQLite store's, documents, order and scores (602 of 602 LoCoMo-dev
// questions, 100 of 100 LongMemEval-dev); with the default budget 99.5%
// and 99.9% of their documents are, in the same order for 320 of 602 and
// 56 of 100 (a truncated list reorders near ties; 2026-12-06). On natural
// text (TestLexicalQuality) the budgeted top 10 hold 98% of the score of
// exact BM25's top 10 and 85% of its documents, and 78% of its top 24
// (lexicalBudget trades this against time). Scoring in Go rather than Lua
// took the channel from about 4.5 to 2 ms of server time per query on the
// injector benchmark's corpus at 100,000 nodes (the server's one thread is
// what concurrent turns queue for). The scope tags of one read (the
// project, the global memories, other projects) share each round trip.
// A CrossProject read searches only the projects holding memories of
// reach anywhere (the reach registry, reach.go: their reach-anywhere
// postings read in the posting heads' round trip) and counts the statistics
// of the tenant's other projects without searching them; what it read of
// those it keeps for 30 s (statscache.go: their counts weigh the query's
// terms, and barely move between two turns).
// Vector sets store int8 codes (Q8, WithVectorQuantization): at 100,000
// 384-dimension vectors a VSIM (count 98, EF 120) took p50 1.63 ms against
// 2.45 ms on float32, serially on the same set; cosines are within 0.004
// of the exact ones (mean 0.0007) and the top 60 are the same. The conformance
// suite therefore holds vector scores to within 0.01 of the cosine.
// Vector sends VSIM as a plain command (Redis then runs the HNSW search on
// a thread of its own instead of holding the main thread, as it does for
// VSIM called from a script; Redis 8.0 starts a thread per search, so a
// set that answered all its elements, at most 256, is searched on the
// main thread next time, NOTHREAD), asks for more neighbours than needed without
// FILTER and judges their filter fields the same way (VSIM's FILTER in
// 8.0.2 costs 20-30 ms at 10,000 elements), falling back to VSIM FILTER
// when the filter rejects too many. ByPaths and the listings load nodes and apply
// memory.Visible in Go. TestServerFiltersMatchVisible checks the channels'
// filtering against memory.Visible over random filters;
// TestVectorWidensAndFallsBack reaches the FILTER fallback.
// VectorScores (memory.VectorScorer: the lexical candidates the vector
// search missed) reads each element's stored vector with one pipelined VEMB
// RAW per id and computes the cosine here, on the codes for a Q8 set, as
// VSIM does (TestVectorScoresEachQuantization covers Q8, float32 and bin).
//
// # Where a turn's Redis time goes (issue 35)
//
// On the injector benchmark (engram bench inject -store redis, 100,000
// memories in one project, 2026-12-06) the server spent about 2.2 ms of
// CPU a turn; perf and INFO commandstats put a third of it in ZRANGE:
// reading about 1,000 postings a turn, best first, from the posting
// sorted sets. A skip list read in reverse visits nodes scattered over
// the heap, a cache miss or two each: 0.6-0.8 us a posting there, against
// 0.07 us for the same read repeated on a warm cache. So the first
// postings of a list are kept packed in one string, its head (lexhead.go):
// a read is a GET (about 2 us) and the reply is copied from one
// allocation. The read that first needs a head builds it (lexHeadScript:
// ZRANGE and pack, once), for a minute; a writer whose change falls in a
// cached head (a posting added, rescored or removed at a score no lower
// than the head's lowest) drops it in the same script, so a head is always
// the list's current first postings and the channel answers exactly what
// it answered from the sorted sets (TestLexicalHeadsExact; the development
// sets' figures and TestLexicalQuality are unchanged). A write below the
// head keeps it, so a common term's head survives most writes; a write
// that lands in many heads makes the next reads rebuild them, which costs
// what reading the sorted set cost before. At 100,000 memories the
// benchmark kept about 220 heads, 550 KB.
//
// The rest of a turn's server time is spread thin, and some of it was
// waste: node loads asked for the id field as well as the packed value (a
// quarter of each HMGET); the dictionary script built a key and counted a
// list for every term of a short prefix's range that it then dropped; the
// lexical leaders' filter fields were read for 2*limit+20 candidates when
// the limit+10 completed ones suffice unless the filter rejects more than
// ten of them (a field of the
// 100,000-entry filter hash costs about 1.5 us); the leaders' ZMSCORE
// asked each list for every leader, also those whose posting of it was
// read; and conversation neighbours (Adjacent) were a script call per
// memory, eight a turn, one per scope tag now. Together: 1.9-2.5 ms of
// server CPU a turn before, 1.1-1.7 ms after (medians of alternated runs
// in four sittings, with the machine's load; see docs/benchmarks.md). The 0.5 ms that issue 35 asks for needs fewer
// commands a turn, not cheaper ones: the node loads in one read per
// project (a per-project hash of packed values), and the
// dictionary's document frequencies kept where one HMGET reads them. This
// Redis build has no query engine (FT.SEARCH: MODULE LIST shows only
// vectorset), so the lexical channel cannot move there.
//
// This round (issue 35, 2026-12-06, afternoon): perf and INFO commandstats
// on the same benchmark put about half of the server's time in scripts,
// and most of a script's time not in its commands but in turning their
// replies into Lua values and its own reply back: the conversation
// script (a ZRANK, a ZRANGE and a ZSCORE a memory, 8 memories) took 82-96
// us against 15 us for its commands, run alone; a script that only
// builds 50 strings 17 us, an empty one 5 us. So the turn's path runs no
// script now: the lexical dictionary is read from cached prefix ranges
// (lexdict.go; a script only for a range not cached or changed), the
// conversation neighbours are a ZRANK, then a ZRANGE (two plain
// pipelines), the standing instructions a ZRANGE, then the nodes' HMGETs,
// HasPendingEmbeddings a ZCARD and an SMEMBERS, and the injection record
// one HSETEX instead of a MULTI of HSET and HPEXPIRE (see
// docs/benchmarks.md for the figures). What is left is lookups in
// 100,000-entry hashes and sorted sets, a cache miss or two each: the
// candidate loads (about 83 HMGETs of node hashes a turn, a third of the
// time), the lexical leaders' filter fields and ZMSCORE, the dictionary's
// ZCARDs, the conversation ZRANKs in one 100,000-member set (the
// benchmark's memories have no session, so they form one conversation),
// and the round trips' system calls (about 17 a turn). Loading the nodes
// from one hash per project took the server 95 instead of 225 us for 83
// random nodes (measured on the rediscpu-viscopy branch, which kept the
// copies in the vis entries), but a replica of an earlier version that
// changes a node writes its hash and not the copy: during a rolling
// upgrade the copies go stale. So the copies (pn, heads without their
// bodies: GetHeads, with FillTexts for the hits) are written by every
// replica of this version and read only once the operator says no earlier
// one runs: the store's format (format.go, `engram upgrade finish`, which
// rebuilds them first). See docs/benchmarks.md for what they save.
//
// Stop 45 (2026-12-07): a turn was 123 commands in about 19 round trips,
// Redis' CPU about 0.76 ms a turn. Fewer commands: the dictionary's
// document frequencies are one HMGET per project of the df hash (about 50
// ZCARDs a turn gone), kept by the posting scripts and, like the node
// copies, read only from store format 3, which `engram upgrade finish`
// sets after rebuilding them (a df cache checked by versions was not an
// option: every posting write changes a frequency, and only dictionary
// additions and removals change a version). Fewer round trips: the
// contradiction hints ride in the pipeline of the heads they are about
// (memory.HintedHeads, GetHeadsHinted: the candidates', the graph
// neighbours' and the conversation neighbours'), so the hints take no
// round trip of their own and the contradiction check reads no edges of
// conversation neighbours that cannot contradict; the standing selection
// and the readiness gate send their first reads in one pipeline
// (StandingAndPending, inject.StandingGate). Fewer lookups: within a
// Retrieve (memory.HeadCache in its context) the lexical leaders are
// judged by their heads (pn) instead of their filter fields (vis), and the
// candidate load takes those heads from the cache instead of reading them
// again (at store format 2 and later; a leader without a head gets its
// filter fields, a round trip more): 162 field lookups of the two hashes a
// turn became 98. About 75 commands in 15.5 round trips a turn now, and
// Redis' CPU a turn 12-20% lower than before this stop in the same
// sittings (0.78 -> 0.625 ms at 1 client on the steadiest stretch;
// docs/benchmarks.md, "Stop 45"). What is left is lookups in the
// 100,000-entry hashes and sorted sets (the HMGETs of the heads, the
// document frequencies and the dictionary versions; ZMSCORE and ZRANK
// most of the rest) and the round trips that depend on one another: the
// dictionary, the posting heads and the leaders, twice (the question's
// search, then the feedback search, which needs the first one's bodies);
// the heads; the conversation ZRANK, ZRANGE and the neighbours' heads; the
// lines' bodies.
//
// # Measured
//
// go test -run '^$' -bench Channels100k -benchtime 1x with
// ENGRAM_BENCH_LARGE=1 (memorytest.Bench: 100,000 nodes in one project,
// 384-dimension vectors, 60 candidates asked; Redis 8.0.2 on the same
// shared 2-core machine; 2026-11-30, 07:17), wall clock per call:
//
//	upsert (with vector)   170/s, p50 5.13 ms, p99 16.6 ms
//	lexical (BM25, Go)     p50 3.12 ms, p99 8.22 ms   (server CPU 1.76 ms/query,
//	                                                   client CPU p50 1.13 ms)
//	vector (VSIM)          p50 2.25 ms, p99 5.20 ms   (server CPU 0.32 ms/query)
//	by paths               p50 0.67 ms, p99 4.01 ms
//	standing instructions  p50 0.35 ms, p99 1.58 ms   (server CPU 0.20 ms/query)
//	server memory          9,272 bytes/node (5,349 without the float32 copy
//	                       in the hash; the vector set 2,387)
//
// Earlier that day, with BM25 scored in a Lua script and VSIM called from
// one: lexical p50 3.12 / p99 4.54 ms at 3.7 ms of server CPU per query,
// vector p50 2.15 / p99 3.96 ms at 2.0 ms. A lone query is no faster (the
// work moved to the client), but the server's main thread, which every
// concurrent turn queues for, does half the lexical work and none of the
// HNSW search; in the injector benchmark Redis CPU per turn fell from 7.3
// to 5.0 ms and 8-client throughput rose by half (see package inject).
//
// Packing changed the per-turn candidate load most: GetMany of the 120
// candidates the injector's channels return at 100,000 nodes, run serially
// on the injector benchmark's graph, went from p50 4.23 / p99 11.7 ms (29
// fields per node) to p50 1.64 / p99 5.8 ms.
//
// At 10,000 nodes, with the scripts: 207 upserts/s; lexical p50 3.47 / p99 5.13 ms, vector
// 1.69 / 3.75, by paths 0.83 / 1.68, standing 0.70 / 3.34. Before the
// filter-fields hash, the budgeted expansions and the one-pipeline tags the
// lexical channel took p50 6.7 / p99 10.6 ms at 100,000 (server 7.4 ms).
//
// # Atomicity
//
// A write that touches one project runs as one optimistic transaction:
// WATCH the node, digest and edge keys, read, apply the shared rule in Go,
// then MULTI/EXEC every key it changes (the node hash and all its indexes,
// including the Lua that moves postings and VADD). A conflicting writer
// makes EXEC fail and the write is retried. Sessions use small Lua scripts
// (cursor, leases, briefing flag, take-once injections) or WATCH
// (transcript). Expiry (leases, briefing, processed events) is decided
// against the store's clock (WithClock); Redis' own expiry only collects
// garbage a day later. The briefing flag's script answers with the flag's
// expiry, which the store remembers (memory.BriefMemo): a flag is never
// cleared before it expires, so a session's later turns on this replica
// ask Redis nothing until then (one round trip less per turn).
//
// Writes that span projects (an edge between a project and a global memory,
// Supersede or Revise across projects, PutBatch edges between projects) are
// done in steps, each atomic on its slot, in an order that a retry
// completes: the copy of an edge before its primary, the edge before the
// close. A new id is written to the id index before its node.
//
// PutBatch is one MULTI per project: a batch of thousands of nodes with
// vectors holds the server for seconds (VADD builds the HNSW graph), so
// bulk loads should send batches of a few hundred nodes.
//
// A transaction's EXEC is answered before the primary's replicas have it:
// Durable (durable.go) is what a worker asks before it acknowledges an
// event, and returns once a replica of every primary holds every write the
// primary took so far (WAIT on a connection that just wrote, one per
// primary), so that a failover promotes a replica that has them.
//
// # Import (issue 35)
//
// An import (engram memory import, the bench's seeding) is PutBatch
// chunks of 500 new nodes, one after another: each WATCHes the project's
// digest hash, so two cannot overlap, and the server's one thread is the
// bound. Writing a chunk one node at a time cost about 80 us of server
// time a memory, 60-77 us of it in the posting script run once per node
// (about 30 ZADDs a memory: a posting and a dictionary entry per term).
// A chunk now gathers its writes per key (tagWrites): one
// posting-script call for all its documents, each weighted with
// the statistics the ones before it left (the scores one call per node
// gives, TestPostingsBatchEqualsOneByOne; PutBatch computes them in Go
// from the statistics it reads under WATCH, and reindexScoredScript only
// stores them: the script's arithmetic and tables were about a third of
// the chunk's server time), then writes one ZADD per term
// with all the chunk's postings of it, one dictionary ZADD (and, when it
// added terms, one HSET of their buckets' versions: lexdict.go), one heads
// HMGET and one HINCRBY per statistic; and one HSET or ZADD or SADD per
// shared hash and set (filter fields, digests, timeline, live, standing,
// backlog, conversation) instead of one per node. The server's time fell
// to 41-50 us a memory and BenchmarkImport/redis from about 7,000 to
// 10,000 memories/s (medians; docs/benchmarks.md). What is left on the server is
// inserting the postings (about 15 a memory, 1.4 us each) and the
// script's arithmetic; the client (decoding, redaction, building the
// transaction) is the other half of the wall time, and waits for the
// server chunk by chunk.
//
// Embedding after the import (memory.EmbedPending, SetEmbedding one
// node at a time) costs far more: VADD's graph insert took about 850 us
// of server time a memory, run from vaddScript inside the transaction and
// so on the main thread; an import with the hashing embedder ran at about
// 800 memories/s on Redis against 2,700 on SQLite.
//
// # Cluster
//
// No command names keys of two slots: multi-key commands, scripts and
// transactions stay within one project's tag, and cross-project reads
// (CrossProject, Scan, PendingEmbeddings) send one command per project.
// TestClusterConformance runs the whole suite on a three-node cluster and
// TestClusterSpread checks that projects land on every master.
package redis
