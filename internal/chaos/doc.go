// Package chaos is the multi-process end-to-end suite with chaos: it builds
// and starts the real processes of a distributed deployment, drives a
// scripted conversation through the Go client (pkg/events), kills and
// restarts processes under load, and checks that nothing was lost,
// duplicated or dead-lettered. `make chaos` (scripts/chaos.sh) runs it; a
// plain `go test ./...` skips it (it needs ENGRAM_CHAOS=1).
//
// Two runs share the binaries, the script and the checks: TestChaos on a
// single nats-server and a single redis-server (what follows), and
// TestChaosCluster on clusters (see "The clustered run" below).
//
// # What runs
//
// Each a process of its own, built by the test (go build):
//
//   - nats-server, the github.com/nats-io/nats-server/v2 of go.mod, with
//     JetStream on a file store in the work dir and authentication like a
//     real deployment: its configuration includes the accounts.conf that
//     `engram nats-config` prints (one least-privilege user per role,
//     internal/natsauth), the server's environment holds a fresh random
//     ENGRAM_<ROLE>_PASSWORD per role, and every client connects as its
//     role's user (ENGRAM_NATS_USER/ENGRAM_NATS_PASSWORD, cluster.env):
//     each worker process as its role, `engram setup` as setup, the idle
//     detector as idle, the platform driver as platform (cluster.connect;
//     it may publish input events and read replies on _INBOX.>, nothing
//     else) and the checks as admin (they read ENGRAM_OUT, the DLQ and the
//     consumers, which the platform may not). There is no run without
//     authentication;
//   - a private redis-server (Redis 8 from scripts/redis8.sh, `server`
//     subcommand) on a port of its own, with AOF (appendfsync everysec: the
//     AOF is written before a reply, so a process kill loses nothing
//     acknowledged), never the shared test servers;
//   - cmd/chaosmodel, the scripted Ollama-compatible server (pkg/llm/llmtest)
//     with this package's replies (Install), switchable down (connection
//     refused) and unavailable (503) through a control endpoint;
//   - `engram setup` and `engram upgrade finish` (the Redis store at the
//     latest format, as the Helm chart installs it), then two injectors, two
//     extractors, a consolidator, a compactor (cmd/injector, ...) and the
//     idle detector (`engram serve -workers none` on the external bus: the
//     detector without workers).
//
// Every Engram process gets ENGRAM_ACK_WAIT=8s (a killed worker's events
// come back after 8 s rather than the roles' 10 s to 2 min),
// ENGRAM_IDLE_QUIET=8s, ENGRAM_COMPACT_THRESHOLD=1500 tokens and the
// built-in hashing embedder; everything else is the default.
//
// # The script
//
// Sessions of 40 turns (ENGRAM_CHAOS_TURNS_PER_SESSION) in four projects,
// 8 at a time (ENGRAM_CHAOS_CLIENTS). Turn t of session s talks about fact
// t mod 3 of s (UserText: four pseudo-words of its own and a marker,
// chaosref:s:f). The platform publishes turn_started with a reply subject
// and a 3 s reply deadline and waits for the block, waits 20 ms (its
// model), then publishes turn_ended (the user and assistant messages) and
// tokens_reported (0 tokens: the compactor estimates the transcript). A
// publish the bus refuses (it is down) is repeated with the same event id
// until it lands. The scripted model is deterministic:
//
//   - extraction: "used" for every memory under INJECTED MEMORIES, and one
//     decision per fact marker in the transcript (FactLabel), so the
//     expected memories are known: one per (session, fact);
//   - consolidation: on a pass's first step, unless the stored memories
//     shown hold it, memory_remember the session's review fact
//     (ReviewLabel), then memory_done;
//   - compaction: a summary naming the session (SummaryMarker) and the
//     facts of the messages it covers.
//
// # The phases
//
//  1. Warm-up without chaos: two sessions of 7 turns, one turn at a time,
//     waiting for every consumer between turns; from turn 3 on each block
//     must recall the turn's fact (stored by turn t-3).
//  2. The replay (ENGRAM_CHAOS_TURNS, default 10,000) with chaos:
//     ENGRAM_CHAOS_KILLS (default 60) kill -9 of a random worker process
//     (injectors, extractors, consolidator, compactor, idle detector) at
//     random points of the replay (uniform over 2%-95% of the turns; the
//     victim restarts 0.2-2 s later); kill -9 of nats-server at 30% of the
//     turns and of redis-server at 50% (10 s after reaching the mark; the
//     injectors are spared from the mark until 10 s after the restart, so
//     that the turns late around it are the server's), each down 3-6 s,
//     then restarted on the same store; the model down at 65% for ENGRAM_CHAOS_OUTAGE
//     (default 10m): the first half connection refused, the second half
//     503 on every request, the workers' own settings unchanged (the
//     default gate interval 2 s, unavailable delay 10 s, max deliveries
//     10), so a real outage of that length is what they live through.
//  3. Drain: every consumer of ENGRAM_IN with nothing pending and nothing
//     unacknowledged for 24 s in a row (3 x the quiet time, so every
//     session_idle is published and consolidated).
//
// # The checks (report, and each a test failure)
//
//   - injection: every turn_started was answered (injection_ready on
//     ENGRAM_OUT, at most one per turn) or skipped by the injector with its
//     logged reason ("arrived after its reply deadline"): lost = neither;
//   - transcripts: every session's stored messages are exactly its turns'
//     user and assistant messages, in order, once;
//   - extraction: every turn has the extractor's done record; exactly one
//     live memory per expected fact, in its project; no other live memory
//     (duplicated = extra copies, unexpected = anything else);
//   - feedback, exactly: every turn's injection record is read back from
//     the store after the drain (the injector records the block it
//     answered with; the extractor keeps a record an hour after judging
//     it, extract.KeepInjection) and must be the turn's one block: equal to
//     its injection_ready on ENGRAM_OUT (ids and text) and to every answer
//     the platform received, in time or late (records_mismatch); an
//     injection_ready without a record is a failure (answered_unrecorded).
//     The one allowed difference is a turn whose record write failed,
//     which the injector logs with the event id ("answered block not
//     recorded", the Redis kill): then either nothing is recorded (the
//     redelivery came after the deadline; the turn is not judged:
//     replied_unrecorded) or a redelivery in time composed the recorded
//     block anew (recomposed_after_record_failure). The same holds
//     without the log line for a turn whose injector was killed -9 between
//     its answer and the record (it answers first, for the reply's
//     latency) when the turn's redelivery was skipped as late
//     (killed_between_reply_and_record). The platform names the block's
//     memories in turn_ended (injected_node_ids): the extractor waits for
//     a record still on its way and, when none comes, logs the turns it
//     extracted without one (unjudged), which cannot be more than the
//     answered turns left without a record. The redeliveries the
//     injector answered with their recorded block are counted
//     (answered_from_record; _late: after the reply deadline, which used
//     to be skipped with the record left for the extractor to judge). No
//     memory is judged (useful + unhelpful) more often than the number of
//     turns whose record carried it (double_feedback), with no allowance;
//     every turn whose record carries memories has its feedback record
//     unless all of them were judged for an earlier turn of the session
//     (the extractor judges an id once per span);
//   - consolidation: every session has its review fact, a cursor past 0 and
//     a consolidation_done; compaction: every session with twice the
//     threshold of transcript has a summary of its own (its marker once,
//     never nested), a boundary and a compaction_done;
//   - ENGRAM_DLQ is empty: nothing dead-lettered;
//   - least privilege held: nats-server logged no permission or
//     authorization violation (permission_violations) across the kills and
//     the NATS restart.
//
// # The clustered run
//
// TestChaosCluster runs the same deployment on what Kubernetes runs
// (deploy/k8s: NATS as a StatefulSet of three, Redis Cluster for scale):
//
//   - a JetStream cluster of three nats-servers (n0..n2, routed, each with
//     its file store, the same accounts.conf and role users, monitoring on
//     a port of its own for /healthz and /jsz); every process gets the
//     three URLs (ENGRAM_NATS_URL, comma-separated) and
//     ENGRAM_STREAM_REPLICAS=3, so ENGRAM_IN, ENGRAM_OUT, ENGRAM_DLQ,
//     every consumer and the idle detector's ENGRAM_ACTIVITY bucket have
//     three replicas (checked after the warm-up, and after the drain with
//     every follower current);
//   - a Redis Cluster of three primaries each with a replica: six
//     redis-servers (scripts/redis8.sh server, cluster mode, AOF every
//     second, cluster-node-timeout 5 s) joined by `redis-cli --cluster
//     create --cluster-replicas 1`; every process gets the six addresses
//     (ENGRAM_REDIS_URL, comma-separated: a cluster client).
//
// The chaos: ENGRAM_CHAOS_CLUSTER_NATS_KILLS kill -9 of a NATS node, the
// first always the leader of ENGRAM_IN, then in turn the leader of the
// injector's consumer, of the ENGRAM_ACTIVITY bucket and the meta leader;
// the node stays down until a new leader of its target is elected (and
// 3-6 s at least), then restarts and must be healthy (/healthz: caught up)
// within 3 minutes. ENGRAM_CHAOS_CLUSTER_REDIS_KILLS kill -9 of a Redis
// primary holding data (one not killed before first); it stays down until
// its replica has taken over its slots with the cluster ok (the failover),
// then restarts (as the replica of its former replica) and the cluster
// must be whole again (every node ok, every primary with its replica in
// sync). They alternate, NATS first, from 10% to 60% of the replay, one at
// a time; ENGRAM_CHAOS_CLUSTER_KILLS kills of random workers go on
// meanwhile, sparing the injectors from an ack wait before a node kill to
// 10 s after it, so that the turns late in that window are the node's.
// ENGRAM_CHAOS_CLUSTER_OUTAGE is its model outage (0: none). For each node
// kill the report (infra_kills) gives the failover as the cluster saw it
// (a new leader; the replica promoted), and as the platform saw it: the
// turns of its window (from the reply deadline before the kill to 10 s
// after the node is healthy) that got no block in time, when they
// started, the longest pause between two turn_started publishes (how long
// publishing was held up) and the turns with a publish repeated.
//
// The checks are the single run's. The single run reports its NATS and
// Redis restarts the same way.
//
// # Figures
//
// The last runs (docs/benchmarks.md, "Reliability under chaos"), 2026-12-05, both with NATS
// authentication on (role users, 0 permission violations): `make chaos`,
// 3,014 turns, 50 kills, beside a second suite: 0 lost, 0 double feedback
// (exact: 1,874 verdicts against 1,912 recorded (turn, memory) pairs, 0
// records unlike their answers), 5 late redeliveries answered from their
// record; `make chaos-full`, 10,014 turns, 60 kills, a 10-minute outage:
// 0 lost, 0 double feedback (6,201 verdicts against 6,222 pairs), 252 of
// 252 sessions consolidated with consolidation_done, 250 of 250
// compacted, 0 dead-lettered. Earlier runs failed one check each, each a
// product bug fixed since (docs/reliability.md): a session without its
// consolidation_done (the journal closed before publishing), and a
// session half consolidated (a busy session_idle acknowledged while the
// lease holder was dead; consolidate.ErrBusy).
//
// A failed run repeats the first line of each failed check as its last
// output lines (recT): CI shows only the tail of the output.
//
// ENGRAM_CHAOS_REPORT and ENGRAM_CHAOS_CLUSTER_REPORT name a file for each
// run's figures (JSON); ENGRAM_CHAOS_DIR keeps the work dirs (bin/, the
// binaries built once for both runs; single/ and cluster/: stores, every
// process's log, one file per start, and turns.tsv, what the platform saw
// of every turn) instead of temporary ones; ENGRAM_CHAOS_SEED repeats a
// run's chaos points.
package chaos
