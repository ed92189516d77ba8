#!/usr/bin/env bash
# test/build_pg.sh: build another PostgreSQL major version from Debian's
# source package into a cache folder, to run the suites against it:
#
#   bash test/build_pg.sh 18                    # or 17; as root
#   make test PG_CONFIG=/var/cache/queue-pg/18/bin/pg_config
#   bash test/build_pg.sh 18 --headers          # configure and the generated
#                                               # headers only (test/compile_check.sh)
#
# CI and the default `make test` use Debian's own PostgreSQL 15 and never
# run this.  A build takes about 10 minutes on 2 cores (it runs under
# nice -n 19 with make -j2; QUEUE_PG_JOBS changes -j).
#
# What it does, skipping each step already done (stamp files in the cache):
#   1. A deb-src entry for the suite that carries the version (17: trixie,
#      18: sid) in /etc/apt/sources.list.d/queue-pg-src.sources, on the
#      mirror the system's own entries use.  deb-src only: nothing is ever
#      installed or upgraded from those suites.
#   2. The build tools from the system's own suite (bookworm): a compiler,
#      bison, flex, readline, zlib, ICU, IPC::Run, dpkg-dev.
#   3. `apt-get source --download-only postgresql-NN`, unpacked with
#      --skip-patches: Debian's patches move the install directories and the
#      default socket to fit its packaging, a private prefix wants upstream's.
#   4. configure --prefix=<cache>/NN --enable-tap-tests, build and install
#      the server and client programs, then what PGXS test running needs:
#      pg_regress, the isolation tester and pg_isolation_regress, the TAP
#      modules (PostgreSQL::Test::*), contrib dblink and test_decoding.
#      With --headers: configure and the generated headers only (a minute or
#      two), and the last line printed is the source tree's include folder.
#
# Environment:
#   QUEUE_PG_CACHE   the cache folder (default /var/cache/queue-pg); it must
#                    be reachable by the OS user postgres, which runs the
#                    test servers from <cache>/NN/bin
#   QUEUE_PG_JOBS    parallel make jobs (default 2)
#   QUEUE_PG_CONFIGURE  extra configure options (e.g. --enable-cassert)
#   QUEUE_PG_MIRROR  the Debian mirror of the deb-src entry (default: the
#                    one the system's apt sources name for its own release)
#   QUEUE_PG_SRC     an unpacked PostgreSQL source tree of that major
#                    version to build instead of the Debian source package
#                    (steps 1 and 3 are skipped), for when the mirror does
#                    not serve the package's source files
#
# The last line printed is the pg_config to pass to make.

set -euo pipefail

MAJOR=${1:-}
HEADERS=0
[ "${2:-}" = --headers ] && HEADERS=1
case $MAJOR in
16) SUITE= ;; # in no Debian suite reachable here: QUEUE_PG_SRC names a tree
17) SUITE=trixie ;;
18) SUITE=sid ;;
19) SUITE=experimental ;;
*)
	echo "usage: $0 16|17|18|19 [--headers]" >&2
	exit 2
	;;
esac
if [ -z "$SUITE" ] && [ -z "${QUEUE_PG_SRC:-}" ]; then
	echo "build_pg $MAJOR: no Debian suite carries $MAJOR; set QUEUE_PG_SRC to a PostgreSQL $MAJOR source tree" \
		"(postgres/postgres at the newest REL_${MAJOR}_* tag: docs/commands.md)" >&2
	exit 2
fi
CACHE=${QUEUE_PG_CACHE:-/var/cache/queue-pg}
JOBS=${QUEUE_PG_JOBS:-2}
PREFIX=$CACHE/$MAJOR
SRCROOT=$CACHE/src/$MAJOR
LOGDIR=$CACHE/log
APT_SOURCES=/etc/apt/sources.list.d/queue-pg-src.sources

say() { echo "build_pg $MAJOR: $*"; }
die() {
	echo "build_pg $MAJOR: $*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] || die "run as root (apt-get, and the cache belongs to root)"
mkdir -p "$CACHE" "$SRCROOT" "$LOGDIR"
chmod 755 "$CACHE"

# run LOG CMD...: run a long step at low priority, its output in LOG.
run() {
	local log=$1
	shift
	if ! nice -n 19 "$@" >"$log" 2>&1; then
		tail -n 40 "$log" >&2
		die "failed: $* (log: $log)"
	fi
}

export DEBIAN_FRONTEND=noninteractive

# system_mirror: the first archive URI the system's apt sources give for
# its own release (not the security archive).
system_mirror() {
	local codename f
	# shellcheck disable=SC1091  # the system's own file
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	{
		grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
			awk -v c="$codename" '{ for (i = 2; i < NF; i++) if ($i ~ /^[a-z]+:\/\// && $(i + 1) == c) print $i }'
		for f in /etc/apt/sources.list.d/*.sources; do
			[ -e "$f" ] && awk -v c="$codename" '
				/^URIs:/ { u = $2 }
				/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == c) print u }' "$f"
		done
	} | grep -v security | head -n 1
}

# 1. deb-src entry.
if [ -z "${QUEUE_PG_SRC:-}" ]; then
	if [ ! -e "$APT_SOURCES" ] || ! grep -qw "$SUITE" "$APT_SOURCES"; then
		mirror=${QUEUE_PG_MIRROR:-$(system_mirror)}
		[ -n "$mirror" ] || die "no Debian mirror found in the apt sources (set QUEUE_PG_MIRROR)"
		suites="$SUITE"
		[ -e "$APT_SOURCES" ] && suites=$(sed -n 's/^Suites: *//p' "$APT_SOURCES")" $SUITE"
		say "adding deb-src for $suites to $APT_SOURCES"
		cat >"$APT_SOURCES" <<EOF
# deb-src only, for test/build_pg.sh of the queue extension (apt-get source).
# No binary package is ever installed from these suites.
Types: deb-src
URIs: $mirror
Suites: $suites
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
		rm -f "$CACHE/.apt-updated"
	fi
	if [ ! -e "$CACHE/.apt-updated" ] || ! apt-cache showsrc "postgresql-$MAJOR" 2>/dev/null | grep -q '^Package:'; then
		say "apt-get update"
		apt-get update </dev/null >"$LOGDIR/apt-update.log" 2>&1 || die "apt-get update failed (log: $LOGDIR/apt-update.log)"
		touch "$CACHE/.apt-updated"
	fi
fi

# 2. Build tools, from the system's own suite (for --headers, only what
# configure and the generated headers need).
tools=(build-essential bison flex libreadline-dev zlib1g-dev libicu-dev pkg-config libipc-run-perl dpkg-dev)
[ "$HEADERS" = 1 ] && tools=(build-essential bison flex dpkg-dev)
need=()
for p in "${tools[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	say "apt-get install ${need[*]}"
	apt-get install -y --no-install-recommends "${need[@]}" </dev/null \
		>"$LOGDIR/apt-install.log" 2>&1 || die "apt-get install failed (log: $LOGDIR/apt-install.log)"
fi

# 3. The source package (or QUEUE_PG_SRC).
SRC=$SRCROOT/postgresql
if [ ! -e "$SRCROOT/.unpacked" ]; then
	rm -rf "$SRCROOT"
	mkdir -p "$SRCROOT"
	if [ -n "${QUEUE_PG_SRC:-}" ]; then
		[ -x "$QUEUE_PG_SRC/configure" ] || die "no configure in QUEUE_PG_SRC=$QUEUE_PG_SRC"
		grep -q "^PACKAGE_VERSION='$MAJOR\." "$QUEUE_PG_SRC/configure" ||
			die "QUEUE_PG_SRC=$QUEUE_PG_SRC is not PostgreSQL $MAJOR"
		say "copying $QUEUE_PG_SRC"
		cp -a "$QUEUE_PG_SRC/." "$SRC"
		echo "$QUEUE_PG_SRC" >"$SRCROOT/.unpacked"
	else
		say "apt-get source postgresql-$MAJOR/$SUITE"
		if ! (cd "$SRCROOT" && apt-get source --download-only "postgresql-$MAJOR/$SUITE" </dev/null) \
			>"$LOGDIR/source-$MAJOR.log" 2>&1; then
			grep -E '^(E|Err):' "$LOGDIR/source-$MAJOR.log" >&2
			die "apt-get source postgresql-$MAJOR/$SUITE failed (log: $LOGDIR/source-$MAJOR.log); a 404 means the mirror does not serve that source package: point QUEUE_PG_SRC at an unpacked PostgreSQL $MAJOR source tree instead"
		fi
		dsc=$(ls "$SRCROOT"/postgresql-"$MAJOR"_*.dsc)
		(cd "$SRCROOT" && dpkg-source --skip-patches -x "$dsc" postgresql) \
			>>"$LOGDIR/source-$MAJOR.log" 2>&1 || die "dpkg-source failed (log: $LOGDIR/source-$MAJOR.log)"
		basename "$dsc" .dsc >"$SRCROOT/.unpacked"
	fi
fi
say "source $(cat "$SRCROOT/.unpacked")"

# 4. Configure, build, install.  --headers configures without the
# optional libraries (quicker, fewer packages) and says so in its stamp: a
# full build after it configures again.
if [ "$HEADERS" = 1 ] && [ ! -e "$SRCROOT/.configured" ] && [ ! -e "$SRCROOT/.configured-headers" ]; then
	say "configure (headers only)"
	(cd "$SRC" && run "$LOGDIR/configure-$MAJOR.log" ./configure --prefix="$PREFIX" \
		--without-icu --without-readline --without-zlib)
	touch "$SRCROOT/.configured-headers"
fi
if [ "$HEADERS" = 0 ] && [ ! -e "$SRCROOT/.configured" ]; then
	rm -f "$SRCROOT/.configured-headers" "$SRCROOT/.headers"
	say "configure --prefix=$PREFIX"
	# shellcheck disable=SC2086  # QUEUE_PG_CONFIGURE is a list of options
	(cd "$SRC" && run "$LOGDIR/configure-$MAJOR.log" ./configure --prefix="$PREFIX" \
		--enable-tap-tests --enable-debug ${QUEUE_PG_CONFIGURE:-})
	touch "$SRCROOT/.configured"
fi
if [ "$HEADERS" = 1 ]; then
	if [ ! -e "$SRCROOT/.headers" ]; then
		say "make generated-headers"
		run "$LOGDIR/headers-$MAJOR.log" make -C "$SRC/src/backend" generated-headers
		touch "$SRCROOT/.headers"
	fi
	echo "$SRC/src/include"
	exit 0
fi
if [ ! -e "$SRCROOT/.installed" ]; then
	say "make -j$JOBS (about 10 minutes; log: $LOGDIR/build-$MAJOR.log)"
	run "$LOGDIR/build-$MAJOR.log" make -C "$SRC" -j"$JOBS"
	run "$LOGDIR/build-contrib-$MAJOR.log" make -C "$SRC/contrib/dblink" -j"$JOBS"
	run "$LOGDIR/build-contrib-$MAJOR.log" make -C "$SRC/contrib/test_decoding" -j"$JOBS"
	run "$LOGDIR/build-isolation-$MAJOR.log" make -C "$SRC/src/test/isolation" -j"$JOBS"
	say "make install into $PREFIX"
	run "$LOGDIR/install-$MAJOR.log" make -C "$SRC" install
	for d in contrib/dblink contrib/test_decoding src/test/regress src/test/isolation src/test/perl; do
		run "$LOGDIR/install-$MAJOR.log" make -C "$SRC/$d" install
	done
	chmod -R a+rX "$PREFIX"
	touch "$SRCROOT/.installed"
fi

# What the suites need, where run_tests.sh looks for it.
PGXS_DIR=$(dirname "$("$PREFIX/bin/pg_config" --pgxs)")/..
for f in "$PREFIX/bin/postgres" "$PREFIX/bin/initdb" "$PREFIX/bin/pg_dump" \
	"$PGXS_DIR/test/regress/pg_regress" \
	"$PGXS_DIR/test/isolation/pg_isolation_regress" \
	"$PGXS_DIR/test/isolation/isolationtester" \
	"$PGXS_DIR/test/perl/PostgreSQL/Test/Cluster.pm" \
	"$("$PREFIX/bin/pg_config" --pkglibdir)/dblink.so"; do
	[ -e "$f" ] || die "missing after install: $f"
done
runuser -u postgres -- test -x "$PREFIX/bin/postgres" 2>/dev/null ||
	say "warning: the OS user postgres cannot run $PREFIX/bin/postgres (set QUEUE_PG_CACHE to a folder it can reach)"
say "$("$PREFIX/bin/pg_config" --version) in $PREFIX"
echo "$PREFIX/bin/pg_config"
