# debian-apt.sh — sourced by the scripts that fetch a Debian package without
# touching the system's apt configuration (redis8.sh, promtool.sh): a
# private source list, lists and cache under $APTDIR. The sourcing script
# sets APTDIR and defines die.

# mirror prints the Debian mirror the system already uses (deb822 or
# one-line format), so the scripts name no host of their own.
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

# keyring prints the Debian archive keyring to sign the private source with.
keyring() {
	local k
	for k in /usr/share/keyrings/debian-archive-keyring.gpg /usr/share/keyrings/debian-archive-trixie-stable.gpg; do
		if [ -f "$k" ]; then
			echo "$k"
			return
		fi
	done
	die "no Debian archive keyring found (apt-get install debian-archive-keyring)"
}

# apt_private runs apt-get with a private source list, lists and cache: the
# system's apt state is neither read for sources nor changed.
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
