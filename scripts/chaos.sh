#!/usr/bin/env bash
# Runs the multi-process chaos suite (internal/chaos, see its package doc):
# real nats-server, a private Redis 8, the scripted model server, `engram
# setup`, the four worker binaries and the idle detector as processes; a
# scripted replay with kill -9 of random workers, NATS and Redis restarts
# and a model outage; then the checks (nothing lost, duplicated or
# dead-lettered). Used by `make chaos` (the CI size) and `make chaos-full`
# (CHAOS_FULL=1: 10,000 turns, a 10-minute outage), and by .ci/run.
#
# Settings (environment; the defaults below depend on CHAOS_FULL):
#   ENGRAM_CHAOS_TURNS            turns of the replay (CI 3000, full 10000)
#   ENGRAM_CHAOS_KILLS            kill -9 of random workers (CI 50, full 60)
#   ENGRAM_CHAOS_OUTAGE           model outage (CI 2m, full 10m)
#   ENGRAM_CHAOS_TURNS_PER_SESSION, ENGRAM_CHAOS_CLIENTS, ENGRAM_CHAOS_SEED
#   ENGRAM_CHAOS_DIR              keep the work dir (binaries, stores, logs) there
#   ENGRAM_CHAOS_REPORT           write the figures (JSON) there
#   ENGRAM_CHAOS_TIMEOUT          go test -timeout (CI 14m, full 60m)
set -euo pipefail
cd "$(dirname "$0")/.."

# The suite starts a Redis server of its own from the Redis 8 that
# redis8.sh unpacks (it never touches the shared test servers).
timeout --kill-after=10 "${ENGRAM_REDIS_SETUP_TIMEOUT:-900}" bash scripts/redis8.sh install

if [ -n "${CHAOS_FULL:-}" ]; then
	: "${ENGRAM_CHAOS_TURNS:=10000}" "${ENGRAM_CHAOS_KILLS:=60}" "${ENGRAM_CHAOS_OUTAGE:=10m}" "${ENGRAM_CHAOS_TIMEOUT:=60m}"
else
	: "${ENGRAM_CHAOS_TURNS:=3000}" "${ENGRAM_CHAOS_KILLS:=50}" "${ENGRAM_CHAOS_OUTAGE:=2m}" "${ENGRAM_CHAOS_TIMEOUT:=14m}"
fi
export ENGRAM_CHAOS=1 ENGRAM_CHAOS_TURNS ENGRAM_CHAOS_KILLS ENGRAM_CHAOS_OUTAGE

go test -count=1 -run '^TestChaos$' -v -timeout "$ENGRAM_CHAOS_TIMEOUT" ./internal/chaos/
