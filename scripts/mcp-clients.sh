#!/usr/bin/env bash
# mcp-clients.sh — installs the MCP clients the Go suite runs against the
# `memory` tool (internal/mcptool/testdata/clients: the official TypeScript
# SDK and the MCP Inspector CLI, pinned by its package-lock.json) from npm
# into a cache outside the repository, once per lock file.
#
# Usage: scripts/mcp-clients.sh install|path
#   install  npm ci into the cache (idempotent; concurrent runs wait for
#            each other)
#   path     install if needed, then print ONLY the node_modules directory
#            on stdout (progress goes to stderr)
#
# Settings (environment):
#   ENGRAM_CACHE   cache root (default $HOME/.cache/engram); the clients live
#                  in $ENGRAM_CACHE/mcp-clients/<hash of the lock file>
set -euo pipefail

exec 3>&1 1>&2

here="$(cd "$(dirname "$0")/.." && pwd)"
src="$here/internal/mcptool/testdata/clients"
log() { printf 'mcp-clients: %s\n' "$*" >&2; }
die() {
	printf 'mcp-clients: error: %s\n' "$*" >&2
	exit 1
}

command -v node >/dev/null 2>&1 || die "node is not installed (Node 20 or later)"
command -v npm >/dev/null 2>&1 || die "npm is not installed"
[ -f "$src/package-lock.json" ] || die "no $src/package-lock.json"

sum="$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -c1-16)"
root="${ENGRAM_CACHE:-$HOME/.cache/engram}/mcp-clients"
dir="$root/$sum"

install() {
	mkdir -p "$root"
	exec 9>"$root/.lock"
	flock 9
	if [ -f "$dir/.installed" ]; then
		return
	fi
	log "installing into $dir (npm ci; about a minute)"
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	cp "$src/package.json" "$src/package-lock.json" "$dir.tmp/"
	# The Inspector declares node >= 22.19 but its CLI runs on Node 20;
	# npm only warns about the engine.
	(cd "$dir.tmp" && npm ci --no-audit --no-fund --loglevel=error --ignore-scripts) >&2 ||
		die "npm ci failed in $dir.tmp"
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
	touch "$dir/.installed"
	log "installed"
}

case "${1:-}" in
install) install ;;
path)
	install
	echo "$dir/node_modules" >&3
	;;
*) die "usage: $0 install|path" ;;
esac
