#!/usr/bin/env bash
# redis8.sh — gets a real Redis 8 (with vector sets) running on this machine.
#
# Debian 12 ships Redis 7.0, which has no vector sets. Debian 13 (trixie)
# ships redis 8.0.2 with vector sets built in, but its binary needs glibc 2.38.
# So this script, without touching the system's apt configuration:
#   1. writes a private apt source list for trixie (same mirror as the system's
#      own Debian source) and runs `apt-get update` for that list only, with
#      private lists and cache folders;
#   2. `apt-get download`s redis-tools and the trixie libraries it needs;
#   3. `dpkg -x`es them into one private folder (outside the repo);
#   4. runs the server through trixie's own dynamic loader:
#        ld-linux --library-path <root>/usr/lib/<multiarch> --argv0 redis-server <root>/usr/bin/redis-check-rdb ...
#      (Debian's redis-server is a link to redis-check-rdb; the name selects server mode).
#
# Usage: scripts/redis8.sh install|start|stop|status|env|cli|server [args...]
#   install  download and unpack Redis 8 into the cache (idempotent)
#   start    install if needed, then start a standalone server on 6390 and a
#            3-node cluster on 7001-7003 (slots assigned); idempotent
#   stop     stop every server this script started (no data is kept)
#   status   show what runs
#   env      install and start if needed, wait for PING, and print ONLY
#              export ENGRAM_TEST_REDIS_URL=redis://127.0.0.1:6390/0
#              export ENGRAM_TEST_REDIS_CLUSTER=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
#            on stdout (progress goes to stderr): eval "$(bash scripts/redis8.sh env)"
#   cli      run the bundled redis-cli, e.g. scripts/redis8.sh cli -p 6390 INFO server
#   server   run (exec) the bundled redis-server in the foreground with the
#            given arguments, for a private server of one's own (the chaos
#            suite's, which it kills and restarts), e.g.
#            scripts/redis8.sh server --port 6500 --dir /tmp/r --appendonly yes
#
# Settings (environment):
#   ENGRAM_CACHE           cache root (default $HOME/.cache/engram); Redis lives in $ENGRAM_CACHE/redis8
#   ENGRAM_REDIS_PORT      standalone port (default 6390)
#   ENGRAM_REDIS_CLUSTER_PORTS  cluster ports (default "7001 7002 7003")
#   ENGRAM_DEBIAN_MIRROR   Debian mirror URL (default: the one in the system's apt sources)
set -euo pipefail

# Everything but the final exports goes to stderr.
exec 3>&1 1>&2

CACHE="${ENGRAM_CACHE:-$HOME/.cache/engram}/redis8"
PORT="${ENGRAM_REDIS_PORT:-6390}"
read -r -a CPORTS <<<"${ENGRAM_REDIS_CLUSTER_PORTS:-7001 7002 7003}"
HOST=127.0.0.1
WANT_VERSION=8.0.2
SUITE=trixie
PKGS=(redis-tools libc6 libstdc++6 libgcc-s1 libjemalloc2 liblzf1 libssl3t64 libsystemd0
	libatomic1 libcap2 libgcrypt20 libgpg-error0 liblz4-1 liblzma5 libzstd1)

ROOT="$CACHE/root"
APTDIR="$CACHE/apt"
RUN="$CACHE/run"

log() { printf 'redis8: %s\n' "$*" >&2; }
die() {
	printf 'redis8: error: %s\n' "$*" >&2
	exit 1
}
# shellcheck source=lib/debian-apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/debian-apt.sh"

arch() { dpkg --print-architecture; }

multiarch() {
	case "$(arch)" in
	amd64) echo x86_64-linux-gnu ;;
	arm64) echo aarch64-linux-gnu ;;
	*) die "unsupported architecture $(arch)" ;;
	esac
}

loader() {
	case "$(arch)" in
	amd64) echo "$ROOT/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" ;;
	arm64) echo "$ROOT/usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1" ;;
	esac
}

# run_as NAME BINARY ARGS...: run a trixie binary through trixie's loader.
run_as() {
	local name=$1 bin=$2
	shift 2
	"$(loader)" --library-path "$ROOT/usr/lib/$(multiarch)" --argv0 "$name" "$ROOT/usr/bin/$bin" "$@"
}

server() { run_as redis-server redis-check-rdb "$@"; }
cli() { run_as redis-cli redis-cli "$@"; }

installed() {
	[ -f "$ROOT/.complete" ] && [ -x "$(loader)" ] && [ -x "$ROOT/usr/bin/redis-check-rdb" ]
}

do_install() {
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.install.lock"
	flock 9
	if installed; then
		log "Redis 8 already installed in $ROOT"
		flock -u 9
		return
	fi
	command -v apt-get >/dev/null || die "apt-get is needed"
	command -v dpkg >/dev/null || die "dpkg is needed"
	log "installing Redis 8 from Debian $SUITE into $ROOT"
	mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$APTDIR/debs"
	echo "deb [signed-by=$(keyring)] $(mirror) $SUITE main" >"$APTDIR/sources.list"
	log "apt-get update (private $SUITE list only)"
	apt_private -qq update >&2
	local p missing=()
	for p in "${PKGS[@]}"; do
		if ! ls "$APTDIR/debs/${p}_"*.deb >/dev/null 2>&1; then
			missing+=("$p")
		fi
	done
	if [ ${#missing[@]} -gt 0 ]; then
		log "apt-get download ${missing[*]}"
		(cd "$APTDIR/debs" && apt_private -qq download "${missing[@]}") >&2
	fi
	rm -rf "$ROOT.tmp"
	mkdir -p "$ROOT.tmp"
	local deb
	for deb in "$APTDIR"/debs/*.deb; do
		dpkg -x "$deb" "$ROOT.tmp"
	done
	rm -rf "$ROOT"
	mv "$ROOT.tmp" "$ROOT"
	local v
	v=$(server --version) || die "the unpacked redis-server does not run"
	log "$v"
	case "$v" in
	*"v=$WANT_VERSION"*) ;;
	*) log "warning: expected Redis $WANT_VERSION" ;;
	esac
	touch "$ROOT/.complete"
	flock -u 9
}

ping() { cli -h "$HOST" -p "$1" PING 2>/dev/null | grep -q PONG; }

wait_ping() {
	local port=$1 i
	for i in $(seq 1 100); do
		if ping "$port"; then
			return 0
		fi
		sleep 0.1
	done
	die "Redis on port $port does not answer PING (log: $RUN/$port/redis.log)"
}

start_one() {
	local port=$1
	shift
	if ping "$port"; then
		log "port $port already answers"
		return
	fi
	mkdir -p "$RUN/$port"
	rm -f "$RUN/$port/nodes.conf"
	log "starting Redis 8 on $HOST:$port $*"
	# The daemon must not inherit this script's descriptors: fd 3 is the stdout
	# of `$(redis8.sh env)`, which would never reach EOF while Redis runs (the
	# caller hangs), and fds 8/9 hold the start and install locks.
	server --bind "$HOST" --port "$port" --save "" --appendonly no \
		--daemonize yes --pidfile "$RUN/$port/redis.pid" --logfile "$RUN/$port/redis.log" \
		--dir "$RUN/$port" --protected-mode yes "$@" </dev/null >>"$RUN/$port/start.log" 2>&1 3>&- 8>&- 9>&-
	wait_ping "$port"
}

cluster_ok() {
	local p
	for p in "${CPORTS[@]}"; do
		cli -h "$HOST" -p "$p" CLUSTER INFO 2>/dev/null | grep -q 'cluster_state:ok' || return 1
		cli -h "$HOST" -p "$p" CLUSTER INFO 2>/dev/null | grep -q "cluster_known_nodes:${#CPORTS[@]}" || return 1
	done
}

do_start() {
	installed || do_install
	mkdir -p "$RUN"
	exec 8>"$CACHE/.start.lock"
	flock 8
	start_one "$PORT"
	local p addrs=()
	for p in "${CPORTS[@]}"; do
		start_one "$p" --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000
		addrs+=("$HOST:$p")
	done
	if ! cluster_ok; then
		log "creating the cluster on ${addrs[*]}"
		for p in "${CPORTS[@]}"; do
			cli -h "$HOST" -p "$p" FLUSHALL >/dev/null 2>&1 || true
			cli -h "$HOST" -p "$p" CLUSTER RESET HARD >/dev/null
		done
		cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >&2
		local i
		for i in $(seq 1 200); do
			if cluster_ok; then
				break
			fi
			sleep 0.1
		done
		cluster_ok || die "the cluster did not reach cluster_state:ok"
	fi
	check_server "$PORT"
	flock -u 8
}

check_server() {
	local port=$1 v
	v=$(cli -h "$HOST" -p "$port" INFO server | tr -d '\r' | awk -F: '$1 == "redis_version" { print $2 }')
	[ "$v" = "$WANT_VERSION" ] || log "warning: redis_version:$v on port $port (expected $WANT_VERSION)"
	cli -h "$HOST" -p "$port" MODULE LIST | grep -q vectorset || die "vectorset module missing on port $port"
	log "port $port: redis_version:$v, vectorset loaded"
}

stop_one() {
	local port=$1 pidf="$RUN/$1/redis.pid"
	if ping "$port"; then
		log "stopping Redis on $port"
		cli -h "$HOST" -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
	fi
	if [ -f "$pidf" ]; then
		local pid
		pid=$(cat "$pidf")
		local i
		for i in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
		fi
	fi
	rm -rf "${RUN:?}/$port"
}

do_stop() {
	[ -x "$(loader)" ] || {
		log "not installed, nothing to stop"
		return
	}
	local p
	for p in "$PORT" "${CPORTS[@]}"; do
		stop_one "$p"
	done
}

do_status() {
	installed || {
		log "not installed (run: $0 install)"
		return
	}
	local p
	for p in "$PORT" "${CPORTS[@]}"; do
		if ping "$p"; then
			log "port $p: up"
		else
			log "port $p: down"
		fi
	done
	if cluster_ok; then log "cluster: ok"; else log "cluster: not ok"; fi
}

do_env() {
	do_start
	local p csv=""
	wait_ping "$PORT"
	for p in "${CPORTS[@]}"; do
		wait_ping "$p"
		csv="${csv:+$csv,}$HOST:$p"
	done
	echo "export ENGRAM_TEST_REDIS_URL=redis://$HOST:$PORT/0" >&3
	echo "export ENGRAM_TEST_REDIS_CLUSTER=$csv" >&3
}

case "${1:-}" in
install) do_install ;;
start) do_start ;;
stop) do_stop ;;
status) do_status ;;
env) do_env ;;
cli)
	shift
	installed || do_install
	cli "$@" >&3
	;;
server)
	shift
	installed || do_install
	exec 1>&3 3>&-
	exec "$(loader)" --library-path "$ROOT/usr/lib/$(multiarch)" --argv0 redis-server "$ROOT/usr/bin/redis-check-rdb" "$@"
	;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
