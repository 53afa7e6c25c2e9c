#!/usr/bin/env bash
# Runs the whole test suite with everything it needs: a Redis 8 server and a
# three-node Redis 8 cluster (scripts/redis8.sh), Debian's Chromium for the
# memory console's browser tests (scripts/chromium.sh), and the pinned real Ollama
# server (scripts/ollama.sh: built when CI is set or ENGRAM_BUILD_OLLAMA=1;
# locally, without the cached binary, the real-Ollama tests skip with a hint).
# Used by `make test` and .ci/run.
#
# Each set-up step runs under a deadline, so a stuck download or build fails
# the run with its name instead of using up CI's whole time budget.
set -euo pipefail
cd "$(dirname "$0")/.."

# setup NAME SECONDS CMD...: run a set-up script, print its stdout (exports).
setup() {
	local name=$1 secs=$2 out rc=0
	shift 2
	out=$(timeout --kill-after=10 "$secs" "$@") || rc=$?
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		echo "test.sh: $name did not finish within ${secs}s" >&2
		exit 1
	fi
	if [ "$rc" -ne 0 ]; then
		echo "test.sh: $name failed (exit $rc)" >&2
		exit "$rc"
	fi
	printf '%s\n' "$out"
}

# In CI the Redis servers this run started are stopped when it ends, so no
# daemon outlives the job (locally they keep running for the next run).
if [ -n "${CI:-}" ]; then
	trap 'bash scripts/redis8.sh stop >/dev/null 2>&1 || true' EXIT
fi

# A failing set-up script stops the run here, not as confusing test errors later.
redis_env=$(setup "Redis 8 set-up (scripts/redis8.sh env)" "${ENGRAM_REDIS_SETUP_TIMEOUT:-900}" bash scripts/redis8.sh env)
eval "$redis_env"
chromium_env=$(setup "Chromium for the console's browser tests (scripts/chromium.sh env)" "${ENGRAM_CHROMIUM_SETUP_TIMEOUT:-900}" bash scripts/chromium.sh env)
eval "$chromium_env"
ollama_env=$(setup "Ollama build (scripts/ollama.sh env)" "${ENGRAM_OLLAMA_SETUP_TIMEOUT:-2700}" bash scripts/ollama.sh env)
eval "$ollama_env"

go test -count=1 -timeout 40m ./...
