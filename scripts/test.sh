#!/usr/bin/env bash
# Runs the whole test suite with everything it needs: a Redis 8 server and a
# three-node Redis 8 cluster (scripts/redis8.sh), and the pinned real Ollama
# server (scripts/ollama.sh: built when CI is set or ENGRAM_BUILD_OLLAMA=1;
# locally, without the cached binary, the real-Ollama tests skip with a hint).
# Used by `make test` and .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

# A failing set-up script stops the run here, not as confusing test errors later.
redis_env=$(bash scripts/redis8.sh env)
eval "$redis_env"
ollama_env=$(bash scripts/ollama.sh env)
eval "$ollama_env"

go test -count=1 -timeout 40m ./...
