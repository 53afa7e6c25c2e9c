#!/usr/bin/env bash
# Runs the whole test suite with everything it needs: a Redis 8 server and a
# three-node Redis 8 cluster (scripts/redis8.sh), and the pinned real Ollama
# server (scripts/ollama.sh). Used by `make test` and .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -f scripts/redis8.sh ]; then
  eval "$(bash scripts/redis8.sh env)"
fi
if [ -f scripts/ollama.sh ]; then
  eval "$(bash scripts/ollama.sh env)"
fi

go test -count=1 -timeout 40m ./...
