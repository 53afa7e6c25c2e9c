#!/usr/bin/env bash
# Runs the multi-process chaos suite (internal/chaos, see its package doc):
# real nats-server, a private Redis 8, the scripted model server, `engram
# setup`, the four worker binaries and the idle detector as processes; a
# scripted replay with kill -9 of random workers, NATS and Redis kills and
# a model outage; then the checks (nothing lost, duplicated or
# dead-lettered). Two runs, one after the other:
#   - TestChaos: a single nats-server and a single redis-server;
#   - TestChaosCluster: a JetStream cluster of three (streams, consumers and
#     the activity bucket with three replicas) and a Redis Cluster of three
#     primaries each with a replica; NATS nodes (the stream leader first)
#     and Redis primaries killed -9 during the replay.
# Used by `make chaos` (the CI size: both runs, the clustered one short)
# and `make chaos-full` (CHAOS_FULL=1), and by .ci/run.
#
# Settings (environment; the defaults below depend on CHAOS_FULL):
#   ENGRAM_CHAOS_RUN              single, cluster or both (default both)
#   ENGRAM_CHAOS_TURNS            turns of the single run (CI 3000, full 10000)
#   ENGRAM_CHAOS_KILLS            kill -9 of random workers (CI 50, full 60)
#   ENGRAM_CHAOS_OUTAGE           model outage (CI 2m, full 10m)
#   ENGRAM_CHAOS_CLUSTER_TURNS    turns of the clustered run (CI 1200, full 6000)
#   ENGRAM_CHAOS_CLUSTER_KILLS    its kill -9 of random workers (CI 10, full 30)
#   ENGRAM_CHAOS_CLUSTER_NATS_KILLS, ENGRAM_CHAOS_CLUSTER_REDIS_KILLS
#                                 kill -9 of a NATS node (the first: ENGRAM_IN's leader) /
#                                 a Redis primary (CI 1 and 1, full 4 and 3)
#   ENGRAM_CHAOS_CLUSTER_OUTAGE   its model outage (CI 0: none, full 2m)
#   ENGRAM_CHAOS_TURNS_PER_SESSION, ENGRAM_CHAOS_CLIENTS, ENGRAM_CHAOS_SEED (both runs)
#   ENGRAM_CHAOS_DIR              keep the work dirs (binaries, stores, logs) there: bin/, single/, cluster/
#   ENGRAM_CHAOS_REPORT, ENGRAM_CHAOS_CLUSTER_REPORT   write each run's figures (JSON) there
#   ENGRAM_CHAOS_TIMEOUT          go test -timeout, both runs (CI 15m, full 90m)
set -euo pipefail
cd "$(dirname "$0")/.."

# The suite starts Redis servers of its own from the Redis 8 that
# redis8.sh unpacks (it never touches the shared test servers).
timeout --kill-after=10 "${ENGRAM_REDIS_SETUP_TIMEOUT:-900}" bash scripts/redis8.sh install

if [ -n "${CHAOS_FULL:-}" ]; then
	: "${ENGRAM_CHAOS_TURNS:=10000}" "${ENGRAM_CHAOS_KILLS:=60}" "${ENGRAM_CHAOS_OUTAGE:=10m}" "${ENGRAM_CHAOS_TIMEOUT:=90m}"
	: "${ENGRAM_CHAOS_CLUSTER_TURNS:=6000}" "${ENGRAM_CHAOS_CLUSTER_KILLS:=30}" "${ENGRAM_CHAOS_CLUSTER_OUTAGE:=2m}"
	: "${ENGRAM_CHAOS_CLUSTER_NATS_KILLS:=4}" "${ENGRAM_CHAOS_CLUSTER_REDIS_KILLS:=3}"
else
	: "${ENGRAM_CHAOS_TURNS:=3000}" "${ENGRAM_CHAOS_KILLS:=50}" "${ENGRAM_CHAOS_OUTAGE:=2m}" "${ENGRAM_CHAOS_TIMEOUT:=15m}"
	: "${ENGRAM_CHAOS_CLUSTER_TURNS:=1200}" "${ENGRAM_CHAOS_CLUSTER_KILLS:=10}" "${ENGRAM_CHAOS_CLUSTER_OUTAGE:=0}"
	: "${ENGRAM_CHAOS_CLUSTER_NATS_KILLS:=1}" "${ENGRAM_CHAOS_CLUSTER_REDIS_KILLS:=1}"
fi
export ENGRAM_CHAOS=1 ENGRAM_CHAOS_TURNS ENGRAM_CHAOS_KILLS ENGRAM_CHAOS_OUTAGE \
	ENGRAM_CHAOS_CLUSTER_TURNS ENGRAM_CHAOS_CLUSTER_KILLS ENGRAM_CHAOS_CLUSTER_OUTAGE \
	ENGRAM_CHAOS_CLUSTER_NATS_KILLS ENGRAM_CHAOS_CLUSTER_REDIS_KILLS

case "${ENGRAM_CHAOS_RUN:-both}" in
single) run='^TestChaos$' ;;
cluster) run='^TestChaosCluster$' ;;
both) run='^TestChaos(Cluster)?$' ;;
*)
	echo "chaos.sh: ENGRAM_CHAOS_RUN must be single, cluster or both" >&2
	exit 2
	;;
esac

go test -count=1 -run "$run" -v -timeout "$ENGRAM_CHAOS_TIMEOUT" ./internal/chaos/
