#!/usr/bin/env bash
# chromium.sh — makes sure a headless Chromium is on this machine for the
# memory console's browser tests (internal/console, driven by chromedp).
#
# Debian's chromium package is installed with apt-get when no Chromium is
# found (the browser tests' own lookup: $ENGRAM_CHROMIUM, chromium,
# chromium-browser, google-chrome). Nothing is downloaded from anywhere else:
# a test tool's own browser download does not work on a closed network.
#
# Usage: scripts/chromium.sh [env]
#   (no argument)  install when missing; print where it is on stderr
#   env            the same, then print ONLY `export ENGRAM_CHROMIUM=<path>`
#                  on stdout: eval "$(bash scripts/chromium.sh env)"
set -euo pipefail

exec 3>&1 1>&2

find_chromium() {
	for name in "${ENGRAM_CHROMIUM:-}" chromium chromium-browser google-chrome; do
		[ -n "$name" ] || continue
		if command -v "$name" >/dev/null 2>&1; then
			command -v "$name"
			return 0
		fi
	done
	return 1
}

if ! path=$(find_chromium); then
	if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
		echo "chromium.sh: no Chromium, and not root to install Debian's (apt-get install chromium)" >&2
		exit 1
	fi
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	echo "chromium.sh: installing Debian's chromium" >&2
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
	path=$(find_chromium)
fi
echo "chromium.sh: $path ($("$path" --version 2>/dev/null | head -1))" >&2
if [ "${1:-}" = "env" ]; then
	echo "export ENGRAM_CHROMIUM=$path" >&3
fi
