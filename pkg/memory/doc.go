// Package memory is Engram's memory graph: the model (nodes, edges and
// per-session records), the Store contract every backend implements, the
// rules shared by all backends, and hybrid retrieval on top of the contract
// (retrieve*.go).
//
// # The model
//
// A Node is one memory: a subkind (decision, pattern, failure, preference,
// observation, entity, topic), a scope (session < project < global), the
// tenant it belongs to (TenantID; "" is the default tenant), the project
// (empty for global memories: global within the tenant) and the session that
// wrote it, label and body, a Digest (its identity: SHA-256 of subkind and the
// normalised text, or of the entity key for entity and topic nodes),
// confidence (0..1), weight (1..10), use counters, who wrote the text (Source:
// user text is never overwritten by extraction; an agent's deliberate
// correction, a patch naming Source agent, takes it over) and who asserted
// it (AssertedBy, which no patch changes:
// user > assistant > inferred, the "authority"), reach (here | anywhere),
// pinned, the lifecycle marks (archived, superseded-by, stale, valid-from /
// valid-to: revising closes a fact, it never erases it), paths, at most 8
// entities, timestamps, and an embedding with the name of the model that made
// it. An Edge is a typed, weighted link (re-linking adds 0.25, max 10;
// unlinking closes it). Per session the store keeps transcript messages,
// summaries, the consolidation cursor, injection records, the briefing flag,
// leases and processed-event records.
//
// # Tenants
//
// A tenant owns projects and bounds everything: a SessionRef, a Filter, a
// Pass and every per-project read name one (ProjectRef{Tenant, Project};
// Project "" is the tenant's global space), and two tenants share nothing,
// whatever their project ids. Visible never shows a node of another tenant
// than the filter's: "global" is global within the tenant, and
// CrossProject reaches the tenant's other projects only. Nothing ties two
// tenants: CheckSameTenant refuses an edge, a supersede or a revision
// between them, and PutBatch an id that another tenant holds. The default
// tenant is the empty one, so everything stored before tenants existed is
// the default tenant's and needs no migration of its values (SQLite adds
// its tenant column by itself; Redis keeps the default tenant's keys).
//
// # The contract
//
// Store (store.go) is the whole backend contract, composed of Nodes, Graph,
// Channels, Sessions, Counter (counts.go: live memories by kind and
// scope, archived, closed, pending embeddings, for the `memory` tool's
// stats), Journal (journal.go: the consolidation passes' journals,
// which `engram memory history` lists and `undo` reverts) and Erasure
// (erase.go: a tenant, project or session erased for good, every kind of
// record and what other sessions keep of its memories, counted by kind;
// Purge for what the backend's files keep of deletions; the listings an
// export needs); consumers depend on the narrowest part they use.
// Errors wrap the sentinels ErrNotFound, ErrInvalid, ErrRefused and
// ErrUnavailable; check them with errors.Is.
//
// # The shared rules
//
// Every rule that decides a stored value is a pure function here, so that all
// backends behave identically and a backend only stores and indexes:
//
//   - NewID, PrepareNew (validation listing every problem, defaults, digest,
//     redaction, entity cap, clamping), Redact (secrets out of label and body
//     on every write: gitleaks' default rules, ported in redact_gitleaks.go,
//     plus ours in redact.go; only the secret is replaced, so JSON stays
//     valid), RedactPII and SetPIIRedaction (personal data, per tenant,
//     redact_pii.go), Neutralise and NeutraliseText (neutralise*.go);
//   - Reinforce (what an upsert of an existing digest does), ApplyPatch
//     (Update), ApplyVerdict (feedback), MarkStale and StaleFactor (decay),
//     CheckSupersede (authority and scope), PrepareEdge and Relink;
//   - CheckTenant, CheckSameTenant (the tenant boundary);
//   - Visible (the Filter rules), ValidAt (as-of reads), IsStanding,
//     StandingFor and CompareStanding / SortStanding (standing instructions),
//     CompareTimeline; CountNode (what Count counts);
//   - Provenance, how the memory block and the `memory` tool describe a
//     memory's origin and trust;
//   - Terms, the lexical query tokenizer.
//
// Upsert matching: a node's digest is unique within its tenant's project
// (global nodes: within the tenant's global space). Upsert of a digest that exists reinforces
// that node whatever its state; an archived node is restored only by a user's
// re-assertion, a superseded or closed one stays closed. Update (or PutBatch)
// to a digest another node of the project holds is ErrRefused.
//
// Lifecycle: Archive ("forget") hides a node until Restore, which also
// reopens a superseded or revised node (the caller unlinks the supersedes
// edge). Supersede and
// Revise both close the old node (superseded-by set, valid-to = now) and link
// new -supersedes-> old, and both are refused (ErrRefused) when the new node
// has lower authority or a narrower scope; Revise creates (or reinforces) the
// new node in the same transaction, inheriting what it leaves empty. Timeline
// with AsOf reads the facts valid at that time, closed ones included.
//
// Channel contract: every channel applies Visible, returns at most limit
// (<= 0: DefaultChannelLimit) candidates best first with positive scores;
// Lexical takes Terms output, Vector only compares vectors of the same model
// (cosine > 0), ByPaths scores by the number of matched paths. Every write of
// text (nodes, transcripts, summaries) goes through Redact.
//
// # Neutralisation and redaction (why)
//
// Memory text is untrusted input replayed into a privileged position, so
// two rules hold everywhere:
//
//   - Redact on every write (PrepareNew, ApplyPatch, PrepareTranscript,
//     PrepareSummaryOf): a secret that is never stored cannot leak through a
//     read, an export, a prompt or a backup. Redaction errs towards
//     replacing a value (a value that is itself an assignment is searched
//     again; prose rules in twelve languages take only values that look like
//     secrets) and is checked on the raw files of both backends. Personal
//     data (RedactPII) is redacted too for the tenants that ask for it
//     (SetPIIRedaction): unlike a secret, an address is often what the user
//     wants remembered, so it is an option.
//   - Neutralise on every read into a prompt or a block (the memory block,
//     the models' prompts, the compacted context, the memory tool), not on
//     write: the stored text stays what was said (the user can see and
//     search it), and a stronger neutraliser protects old memories at once.
//     An attacker controls the text, so the neutraliser matches what a model
//     would read (neutralise_view.go: escapes decoded, NFKC, TR39
//     confusable skeletons, whitespace collapsed, letters alone, reversed,
//     ROT13, base64) and changes only the spans found, so that ordinary text
//     (code with its < and >, eleven languages) keeps every character. The
//     filter once ran before whitespace was collapsed and the block then held
//     the exact phrase it had missed; matching on the normalised view with
//     offsets into the original removes that class of bug.
//
// package neutralisetest holds the attack and ordinary corpora and an
// independent checker; every path's tests run them (docs/security.md has
// the figures).
//
// # Adding a backend
//
// Implement Store, apply the shared rules on every write (never re-implement
// them), take the clock as an option (the suite drives a fake clock), and run
// the conformance suite from the backend's tests:
//
//	func TestConformance(t *testing.T) {
//		memorytest.Run(t, func(t *testing.T, now func() time.Time) memory.Store {
//			return openMyStore(t, WithClock(now))
//		})
//	}
//
// A backend may also implement ContradictionHints (retrieve.go): saying
// cheaply which nodes may be an end of a contradicts edge lets retrieval
// skip reading the hits' edges when no two of them may contradict. It is
// optional (Redis has it, where that read is a round trip of its own;
// SQLite reads the edges in process), and a "maybe" is always safe.
//
// Both backends implement Conversations (conversation.go; the suite checks
// it): the memories written just before and after given ones in their
// conversation (the same tenant, project and session, in
// CompareConversation order: when written, then the id in natural order,
// within ConversationGap). Retrieve gives the memory after a leading hit
// that asks a question ConversationAnswer of its score, the memory before
// any leading hit ConversationContext of it: in a chat the answer to a
// question is the next turn, which rarely shares the words the question
// was found by ("How long do you walk them?" - "Usually about an hour").
// On LoCoMo-dev this took R@10 from 0.648 to 0.726; LongMemEval-dev, whose
// memories hold a whole round (question and reply), stayed within 0.01.
//
// Both backends implement VectorScorer too (the suite checks it): the exact
// cosine of a query to the vectors of given nodes. Retrieve scores with it
// the leading 20 lexical candidates that the (approximate) vector search
// did not return and ranks them in the vector channel by their cosine,
// keeping the best 60. An approximate search misses neighbours; on the
// hashing embedder's vectors, which have no neighbourhood structure, it
// missed the nearest one for several questions of the injector benchmark
// (a memory at cosine 0.44 left out of a top 60 that ended at 0.20), and
// the memory a question names by its words is the one that costs most to
// miss. With it, 10 of the benchmark's 11 questions that have an answer
// among the seeded memories recall it, 8 as their first line; without it,
// 5 and 4 (see package inject). A backend without it still works; its
// vector channel is then only what its search found.
//
// A backend may implement TextStore (retrieve.go) when it keeps the
// memories' text out of its memory (the SQLite store: the file holds it,
// and a body of LongMemEval size is 15 KB against the few hundred bytes
// that rank it). GetHeads is GetMany without the bodies, FillTexts reads
// them; Retrieve then loads its candidates, the time channel's and the
// conversation's nodes as heads and reads the bodies of the hits it
// returns, or none with Query.LeaveText (the injector reads those of the
// lines it shows, FillHitTexts). The feedback channel reads its five
// documents with GetMany. The suite checks that GetHeads and FillTexts
// give what GetMany gives (Get/HeadsAndTexts), and that FillTexts gives a
// memory erased since its head was read no ID: FillHitTexts drops it, so a
// turn never shows an erased memory's label without its body (a Redis
// Retrieve keeps the heads its lexical channel read for the candidate
// load, so an erasure by another replica can fall in between).
//
// memorytest.Bench measures the channels at a given size with the same
// factory. Backends today: memory/sqlite (embedded default), memory/redis.
package memory
