#!/usr/bin/env bash
# test/citus_build.sh: build Citus 13.2.2 for the tests and install it into
# the PostgreSQL that PG_CONFIG names (default: pg_config on PATH), once.
#
#   bash test/citus_build.sh                 # as root, or as the owner of
#   PG_CONFIG=/path/pg_config bash test/citus_build.sh   # that PostgreSQL
#
# Citus is a test dependency, never part of the product: test/t/037_citus.pl
# runs queues over a Citus coordinator and two workers when Citus is there.
# test/setup.sh calls this, so `make test` (and CI through .ci/run) builds it
# when it is absent; a build takes about 5 minutes on 2 cores.
#
# Steps, each skipped when done:
#   0. Citus 13.2.2 already installed in that PostgreSQL (citus.so whose
#      version string is 13.2.2, and citus.control): exit at once.
#   1. The Debian packages the build needs (libcurl4-openssl-dev liblz4-dev
#      libzstd-dev libkrb5-dev autoconf), with apt-get when root; as another
#      user it says what is missing and exits 1.
#   2. Unpack ../shared/vendor/citus-13.2.2.tar.gz (beside the clone; or
#      QUEUE_CITUS_TARBALL) into the cache folder, outside the clone, and
#      apply the one-line build fix for PostgreSQL 15.20 to that copy
#      (vendor/README.md): 15.20's commands/dbcommands.h exports
#      have_createdb_privilege, so Citus's static copy is renamed by a
#      #define just before its definition.
#   3. configure PG_CONFIG=..., make -j2 (under nice), make install.
#
# Environment:
#   QUEUE_CITUS_CACHE    cache folder (default /var/cache/queue-citus)
#   QUEUE_CITUS_TARBALL  the source tarball (default ../shared/vendor/...)
#   QUEUE_CITUS_JOBS     parallel make jobs (default 2)
#
# Never reads stdin.  Exit status 0 when Citus is installed at the end.

set -euo pipefail

VERSION=13.2.2
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
CACHE=${QUEUE_CITUS_CACHE:-/var/cache/queue-citus}
TARBALL=${QUEUE_CITUS_TARBALL:-$REPO/../shared/vendor/citus-$VERSION.tar.gz}
JOBS=${QUEUE_CITUS_JOBS:-2}

say() { echo "citus_build: $*"; }
die() {
	echo "citus_build: $*" >&2
	exit 1
}

command -v "$PG_CONFIG" >/dev/null 2>&1 || die "$PG_CONFIG not found"
PKGLIB=$("$PG_CONFIG" --pkglibdir)
SHARE=$("$PG_CONFIG" --sharedir)
PGVER=$("$PG_CONFIG" --version)

# installed: Citus $VERSION's library and control file are in that
# PostgreSQL.  The library carries its version as "Citus 13.2.2" (the
# string citus_version() prints).
installed() {
	[ -f "$PKGLIB/citus.so" ] && [ -f "$SHARE/extension/citus.control" ] &&
		grep -aq "Citus $VERSION" "$PKGLIB/citus.so"
}
if installed; then
	say "Citus $VERSION is installed in $PKGLIB"
	exit 0
fi

[ -f "$TARBALL" ] || die "no $TARBALL (the shared vendor folder beside the clone)"

# One build at a time: a second run waits for the first, then finds Citus
# installed.
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
if installed; then
	say "Citus $VERSION is installed in $PKGLIB"
	exit 0
fi

# 1. Build packages.
pkgs=()
for p in libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev autoconf; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || pkgs+=("$p")
done
command -v cc >/dev/null 2>&1 && command -v make >/dev/null 2>&1 || pkgs+=(build-essential)
if [ ${#pkgs[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		die "missing: ${pkgs[*]}; install them with: sudo apt-get install -y ${pkgs[*]}"
	fi
	say "apt-get install ${pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update </dev/null
	apt-get install -y --no-install-recommends \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
		"${pkgs[@]}" </dev/null
fi

# 2. A fresh copy of the sources per PostgreSQL (the cache key is
# pg_config's path and version), patched.
key=$(printf '%s %s' "$(command -v "$PG_CONFIG")" "$PGVER" | cksum | cut -d' ' -f1)
SRC=$CACHE/$key/citus-$VERSION
mkdir -p "$CACHE/$key"
if [ ! -f "$SRC/.queue-unpacked" ]; then
	rm -rf "$SRC"
	say "unpacking $TARBALL into $CACHE/$key"
	tar -xzf "$TARBALL" -C "$CACHE/$key"
	touch "$SRC/.queue-unpacked"
fi
compat=$SRC/src/include/pg_version_compat.h
server_inc=$("$PG_CONFIG" --includedir-server)
if grep -qs 'have_createdb_privilege' "$server_inc/commands/dbcommands.h" &&
	! grep -q 'citus_compat_have_createdb_privilege' "$compat"; then
	say "build fix: renaming Citus's static have_createdb_privilege ($PGVER exports one)"
	sed -i '/^have_createdb_privilege(void)$/i #define have_createdb_privilege citus_compat_have_createdb_privilege' "$compat"
	grep -q 'citus_compat_have_createdb_privilege' "$compat" || die "the build fix did not apply to $compat"
fi

# 3. Build and install.
log=$CACHE/$key/build.log
say "building Citus $VERSION for $PGVER (make -j$JOBS; log: $log)"
start=$(date +%s)
(
	cd "$SRC"
	if [ ! -f Makefile.global ] || [ ! -f .queue-configured ]; then
		./configure PG_CONFIG="$PG_CONFIG" >"$log" 2>&1
		touch .queue-configured
	fi
	nice -n 19 make -j"$JOBS" >>"$log" 2>&1
	make install >>"$log" 2>&1
) || {
	tail -n 40 "$log" >&2
	die "build failed (log: $log)"
}
installed || die "Citus $VERSION is still not installed in $PKGLIB after make install"
chmod -R a+rX "$PKGLIB" "$SHARE/extension" 2>/dev/null || true
say "installed Citus $VERSION into $PKGLIB in $(($(date +%s) - start)) s"
