#!/usr/bin/env bash
# Runs every fuzz target of the repository for a short while each
# (FUZZTIME, default 10s). Seed corpora also run as ordinary tests in `make test`.
# Usage: scripts/fuzz.sh [package-pattern]   e.g. scripts/fuzz.sh ./pkg/memory
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-10s}"
filter="${1:-.}"
status=0
while IFS= read -r line; do
  file="${line%%:*}"
  name="$(sed -E 's/^.*func (Fuzz[A-Za-z0-9_]*).*/\1/' <<<"$line")"
  pkg="./$(dirname "$file")"
  case "$pkg" in "$filter"*|*"${filter#./}"*) ;; *) continue ;; esac
  echo "== $pkg $name ($fuzztime)" >&2
  if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"; then
    status=1
  fi
done < <(grep -rn --include='*_test.go' '^func Fuzz' . | sed 's|^\./||')
exit $status
