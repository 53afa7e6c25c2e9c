#!/usr/bin/env bash
# promtool.sh — gets Prometheus' promtool for the alert-rule tests
# (deploy/prometheus/alerts_test.yml, run by go test ./deploy/), from the
# Debian `prometheus` package of the system's own release, without touching
# the system's apt configuration (a private source list, lists and cache)
# and without installing the Prometheus server: the package is downloaded
# and only /usr/bin/promtool is kept, in a cache outside the repository.
#
# Usage: scripts/promtool.sh install|path
#   install  download and unpack promtool into the cache (idempotent)
#   path     install if needed, then print ONLY the promtool path on stdout
#
# Settings (environment):
#   ENGRAM_CACHE          cache root (default $HOME/.cache/engram); promtool
#                         lives in $ENGRAM_CACHE/promtool
#   ENGRAM_DEBIAN_MIRROR  Debian mirror URL (default: the one in the
#                         system's apt sources)
set -euo pipefail

exec 3>&1 1>&2

CACHE="${ENGRAM_CACHE:-$HOME/.cache/engram}/promtool"
APTDIR="$CACHE/apt"
BIN="$CACHE/bin/promtool"

log() { printf 'promtool: %s\n' "$*" >&2; }
die() {
	printf 'promtool: error: %s\n' "$*" >&2
	exit 1
}
# shellcheck source=lib/debian-apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/debian-apt.sh"

suite() {
	local c=""
	[ -f /etc/os-release ] && c=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ -n "$c" ] || die "cannot tell the Debian release (/etc/os-release has no VERSION_CODENAME)"
	echo "$c"
}

installed() { [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; }

do_install() {
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.install.lock"
	flock 9
	if installed; then
		flock -u 9
		return
	fi
	command -v apt-get >/dev/null || die "apt-get is needed"
	command -v dpkg >/dev/null || die "dpkg is needed"
	local s
	s=$(suite)
	log "downloading Debian $s's prometheus package for its promtool"
	mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$APTDIR/debs"
	echo "deb [signed-by=$(keyring)] $(mirror) $s main" >"$APTDIR/sources.list"
	apt_private -qq update >&2
	rm -f "$APTDIR"/debs/prometheus_*.deb
	(cd "$APTDIR/debs" && apt_private -qq download prometheus) >&2
	rm -rf "$CACHE/root.tmp"
	mkdir -p "$CACHE/root.tmp" "$CACHE/bin"
	dpkg -x "$APTDIR"/debs/prometheus_*.deb "$CACHE/root.tmp"
	install -m 755 "$CACHE/root.tmp/usr/bin/promtool" "$BIN.tmp"
	mv "$BIN.tmp" "$BIN"
	rm -rf "$CACHE/root.tmp" "$APTDIR"/debs/*.deb
	installed || die "the unpacked promtool does not run"
	log "$("$BIN" --version 2>&1 | head -1)"
	flock -u 9
}

case "${1:-}" in
install) do_install ;;
path)
	do_install
	echo "$BIN" >&3
	;;
*) die "usage: $0 install|path" ;;
esac
