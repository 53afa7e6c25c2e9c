#!/usr/bin/env bash
# ollama.sh — builds the pinned real Ollama server from the Go module proxy, for
# the end-to-end tests in pkg/llm/ollamae2e (see docs/ollama.md).
#
# `go build github.com/ollama/ollama` with cgo builds the server with the CPU
# backend compiled in (no cmake). Module zips drop llama/llama.cpp/vendor/, so
# the few vendored headers are fetched from the module proxy too and passed with
# CGO_CPPFLAGS:
#   github.com/nlohmann/json@v3.12.0+incompatible   single_include/nlohmann/{json,json_fwd}.hpp
#   github.com/gen2brain/malgo@v0.11.24              miniaudio.h   (-> miniaudio/miniaudio.h)
#   github.com/nothings/stb@<pseudo-version>         stb_image.h   (-> stb/stb_image.h)
# The build runs in a temporary module outside the repo, so the project's
# go.mod is never touched. The normal Go module and build caches are used.
#
# Usage: scripts/ollama.sh build|path|env|version
#   build    build the pinned Ollama into the cache if it is not there (idempotent)
#   path     print the binary path if it is built; exit 1 otherwise
#   env      print ONLY `export ENGRAM_TEST_OLLAMA_BIN=<path>` on stdout when the binary
#            exists. With CI set (or ENGRAM_BUILD_OLLAMA=1) it builds first when missing;
#            otherwise, when missing, it prints nothing and a hint on stderr.
#            Use: eval "$(bash scripts/ollama.sh env)"
#   version  print the pinned Ollama version
#   test     build if missing, then run the real-Ollama suite (go test ./pkg/llm/ollamae2e/);
#            extra arguments go to `go test` (e.g. -run Tool -v). `make test-ollama` runs this.
#
# Settings (environment):
#   ENGRAM_CACHE          cache root (default $HOME/.cache/engram); the binary lives in
#                         $ENGRAM_CACHE/ollama/<ollama version>-<go version>/ollama
#   ENGRAM_BUILD_OLLAMA   1: `env` builds when missing even outside CI
#   ENGRAM_OLLAMA_NICE    niceness of the build (default 10)
set -euo pipefail

# Everything but the final exports / path goes to stderr.
exec 3>&1 1>&2

OLLAMA_VERSION=0.17.4
OLLAMA_MOD=github.com/ollama/ollama
HEADER_MODS=(
	"github.com/nlohmann/json@v3.12.0+incompatible"
	"github.com/gen2brain/malgo@v0.11.24"
	"github.com/nothings/stb@v0.0.0-20260802064209-2c980bb59875"
)

log() { printf 'ollama.sh: %s\n' "$*" >&2; }
die() {
	printf 'ollama.sh: error: %s\n' "$*" >&2
	exit 1
}

command -v go >/dev/null 2>&1 || die "go is not on PATH"
GO_VERSION="$(go env GOVERSION)" # e.g. go1.26.8
CACHE_ROOT="${ENGRAM_CACHE:-$HOME/.cache/engram}/ollama"
DIR="$CACHE_ROOT/${OLLAMA_VERSION}-${GO_VERSION}"
BIN="$DIR/ollama"

built() { [ -x "$BIN" ]; }

# moddir MOD@VER: download a module through the proxy, print its directory.
moddir() {
	local json dir
	json="$(go mod download -json "$1")" || die "go mod download $1 failed"
	dir="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' | head -n1)"
	[ -n "$dir" ] && [ -d "$dir" ] || die "no module directory for $1: $json"
	printf '%s\n' "$dir"
}

do_build() {
	if built; then
		log "already built: $BIN"
		return 0
	fi
	command -v gcc >/dev/null 2>&1 && command -v g++ >/dev/null 2>&1 ||
		die "cgo needs gcc and g++ (apt-get install build-essential)"
	mkdir -p "$DIR"

	# One build at a time per cache folder (parallel `make test` runs).
	exec 9>"$DIR/.lock"
	if command -v flock >/dev/null 2>&1; then
		flock 9
	fi
	if built; then
		log "built by another process: $BIN"
		return 0
	fi

	local work start
	work="$(mktemp -d "${TMPDIR:-/tmp}/engram-ollama-build.XXXXXX")"
	# shellcheck disable=SC2064
	trap "rm -rf '$work'" EXIT
	start=$(date +%s)

	log "fetching header modules"
	local inc="$work/include" d
	mkdir -p "$inc/nlohmann" "$inc/miniaudio" "$inc/stb"
	(
		cd "$work" # outside any module
		d="$(moddir "${HEADER_MODS[0]}")"
		cp "$d/single_include/nlohmann/json.hpp" "$d/single_include/nlohmann/json_fwd.hpp" "$inc/nlohmann/"
		d="$(moddir "${HEADER_MODS[1]}")"
		cp "$d/miniaudio.h" "$inc/miniaudio/"
		d="$(moddir "${HEADER_MODS[2]}")"
		cp "$d/stb_image.h" "$inc/stb/"
	)
	chmod -R u+w "$inc"

	log "preparing a temporary module for $OLLAMA_MOD@v$OLLAMA_VERSION"
	mkdir -p "$work/mod"
	cat >"$work/mod/go.mod" <<EOF
module engram.local/ollamabuild

go 1.24
EOF
	(cd "$work/mod" && GOFLAGS=-mod=mod go get "$OLLAMA_MOD@v$OLLAMA_VERSION") || die "go get $OLLAMA_MOD@v$OLLAMA_VERSION failed"

	log "building (cgo, CPU backend; a cold build takes ~5 minutes on 2 cores)"
	(
		cd "$work/mod"
		CGO_ENABLED=1 CGO_CPPFLAGS="-I$inc" nice -n "${ENGRAM_OLLAMA_NICE:-10}" \
			go build -trimpath \
			-ldflags "-s -w -X github.com/ollama/ollama/version.Version=$OLLAMA_VERSION" \
			-o "$work/ollama" "$OLLAMA_MOD"
	) || die "go build $OLLAMA_MOD failed"

	mv "$work/ollama" "$BIN.tmp"
	mv "$BIN.tmp" "$BIN"
	log "built $BIN ($(du -h "$BIN" | cut -f1)) in $(($(date +%s) - start))s"
}

case "${1:-}" in
build)
	do_build
	printf '%s\n' "$BIN" >&3
	;;
path)
	built || die "not built; run: make ollama"
	printf '%s\n' "$BIN" >&3
	;;
env)
	if ! built; then
		if [ -n "${CI:-}" ] || [ "${ENGRAM_BUILD_OLLAMA:-}" = 1 ]; then
			do_build
		else
			log "the pinned Ollama $OLLAMA_VERSION is not built; the real-Ollama tests will skip."
			log "build it once with: make ollama   (or ENGRAM_BUILD_OLLAMA=1 to build from here)"
			exit 0
		fi
	fi
	printf 'export ENGRAM_TEST_OLLAMA_BIN=%q\n' "$BIN" >&3
	;;
version)
	printf '%s\n' "$OLLAMA_VERSION" >&3
	;;
test)
	shift
	do_build
	cd "$(dirname "$0")/.."
	exec 1>&3
	ENGRAM_TEST_OLLAMA_BIN="$BIN" exec go test -count=1 "$@" ./pkg/llm/ollamae2e/
	;;
*)
	die "usage: $0 build|path|env|version|test [go test flags]"
	;;
esac
