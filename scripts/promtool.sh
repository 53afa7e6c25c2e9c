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

suite() {
	local c=""
	[ -f /etc/os-release ] && c=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ -n "$c" ] || die "cannot tell the Debian release (/etc/os-release has no VERSION_CODENAME)"
	echo "$c"
}

# mirror prints the Debian mirror the system already uses (deb822 or
# one-line format), so the script names no host of its own.
mirror() {
	if [ -n "${ENGRAM_DEBIAN_MIRROR:-}" ]; then
		echo "$ENGRAM_DEBIAN_MIRROR"
		return
	fi
	local m=""
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		m=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' /etc/apt/sources.list.d/debian.sources)
	fi
	if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
		m=$(awk '$1 == "deb" && $0 !~ /security/ && $0 ~ /debian/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list)
	fi
	[ -n "$m" ] || die "cannot find the Debian mirror in /etc/apt; set ENGRAM_DEBIAN_MIRROR"
	echo "$m"
}

keyring() {
	local k
	for k in /usr/share/keyrings/debian-archive-keyring.gpg; do
		if [ -f "$k" ]; then
			echo "$k"
			return
		fi
	done
	die "no Debian archive keyring found (apt-get install debian-archive-keyring)"
}

apt_private() {
	apt-get \
		-o Dir::Etc::sourcelist="$APTDIR/sources.list" \
		-o Dir::Etc::sourceparts=- \
		-o Dir::State::Lists="$APTDIR/lists" \
		-o Dir::Cache="$APTDIR/cache" \
		-o Dir::State::status=/dev/null \
		-o APT::Get::List-Cleanup=0 \
		-o APT::Sandbox::User="$(id -un)" \
		-o Debug::NoLocking=1 \
		"$@"
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
