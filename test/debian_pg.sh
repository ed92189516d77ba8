#!/usr/bin/env bash
# test/debian_pg.sh: run `make test` against Debian's own binary packages of
# another PostgreSQL major version, in a chroot of the Debian release that
# ships them:
#
#   bash test/debian_pg.sh 17          # trixie's postgresql-17; as root
#   bash test/debian_pg.sh 18          # sid's postgresql-18
#   bash test/debian_pg.sh 19          # experimental's postgresql-19 (beta),
#                                      # in the sid chroot
#
# This is what users of those versions run (Debian's build, its paths, its
# server-dev package with PGXS, pg_regress, the isolation tester and the TAP
# modules), without building PostgreSQL.  Those packages need their own
# release's C library, newer than bookworm's, hence the chroot.  CI and the
# default `make test` never run this.  First run: about 5 minutes (the
# chroot and its packages, in <cache>/<suite>); later runs: the suites only.
#
# Steps, each skipped when done:
#   1. debootstrap --variant=minbase <suite> into the cache folder.
#   2. In it: postgresql-NN, postgresql-server-dev-NN, a compiler and what
#      test/setup.sh would install (IPC::Run, psycopg, node, npm, the
#      exporter, curl, libmicrohttpd, boto3, the AWS CLI); no cluster is created.  The host's extra CA
#      certificates are copied in, for npm behind a proxy.
#   3. Every run: /proc, /dev and /dev/shm mounted, the work tree copied to
#      /src in the chroot (without .git, build products or node_modules),
#      `make test PG_CONFIG=/usr/lib/postgresql/NN/bin/pg_config` run there,
#      the mounts undone.  The exit status is make test's.
#
# Environment: QUEUE_PG_CACHE (default /var/cache/queue-pg), QUEUE_PG_MIRROR
# (default the Debian mirror the system's apt sources use).

set -euo pipefail

MAJOR=${1:-}
FROM=
case $MAJOR in
17) SUITE=trixie ;;
18) SUITE=sid ;;
19) SUITE=sid FROM=experimental ;;
*)
	echo "usage: $0 17|18|19" >&2
	exit 2
	;;
esac
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${QUEUE_PG_CACHE:-/var/cache/queue-pg}
ROOT=$CACHE/$SUITE
LOGDIR=$CACHE/log

say() { echo "debian_pg $MAJOR: $*"; }
die() {
	echo "debian_pg $MAJOR: $*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, chroot, mount)"
mkdir -p "$CACHE" "$LOGDIR"
export DEBIAN_FRONTEND=noninteractive

mirror=${QUEUE_PG_MIRROR:-$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{ print $2 }' | grep -v security | head -n 1)}
[ -n "$mirror" ] || mirror=$(awk '/^deb / && $2 ~ /^http/ && $0 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
[ -n "$mirror" ] || die "no Debian mirror found in the apt sources (set QUEUE_PG_MIRROR)"

# 1. The chroot.
if [ ! -e "$ROOT/.debootstrapped" ]; then
	command -v debootstrap >/dev/null 2>&1 ||
		apt-get install -y --no-install-recommends debootstrap </dev/null >"$LOGDIR/debootstrap-install.log" 2>&1 ||
		die "apt-get install debootstrap failed (log: $LOGDIR/debootstrap-install.log)"
	say "debootstrap $SUITE into $ROOT (log: $LOGDIR/debootstrap-$SUITE.log)"
	rm -rf "$ROOT"
	debootstrap --variant=minbase "$SUITE" "$ROOT" "$mirror" >"$LOGDIR/debootstrap-$SUITE.log" 2>&1 ||
		die "debootstrap failed (log: $LOGDIR/debootstrap-$SUITE.log)"
	touch "$ROOT/.debootstrapped"
fi

mounted=()
unmount() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" 2>/dev/null || true
	done
}
trap unmount EXIT
mount_once() {
	local target=$ROOT$1
	shift
	mountpoint -q "$target" && return 0
	mount "$@" "$target"
	mounted+=("$target")
}
mount_once /proc -t proc proc
mount_once /dev --bind /dev
mount_once /dev/shm -t tmpfs tmpfs
cp /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
# Check-Valid-Until off for every apt-get in the chroot (test/setup.sh's
# too, inside make test): a mirror that is a dated snapshot serves sid's
# Release file past its expiry (seen here), and apt then refuses it.
echo 'Acquire::Check-Valid-Until "false";' >"$ROOT/etc/apt/apt.conf.d/99queue-no-valid-until"

# 2. Packages.
# (the marker names the package set: a new set installs again)
if [ ! -e "$ROOT/.installed-$MAJOR-sqs" ]; then
	# No "main" cluster: nothing here uses one.
	mkdir -p "$ROOT/etc/postgresql-common/createcluster.d"
	echo "create_main_cluster = false" >"$ROOT/etc/postgresql-common/createcluster.d/queue-no-main.conf"
	if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
		mkdir -p "$ROOT/usr/local/share/ca-certificates"
		cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
	fi
	# A beta comes from experimental: only its own packages (pkg/suite),
	# everything else from the chroot's release.
	pg_pkgs="postgresql-$MAJOR postgresql-server-dev-$MAJOR"
	if [ -n "$FROM" ]; then
		echo "deb $mirror $FROM main" >"$ROOT/etc/apt/sources.list.d/queue-$FROM.list"
		pg_pkgs="postgresql-$MAJOR/$FROM postgresql-server-dev-$MAJOR/$FROM postgresql-client-$MAJOR/$FROM"
	fi
	say "apt-get install postgresql-$MAJOR and the test tools (log: $LOGDIR/chroot-install-$MAJOR.log)"
	# Check-Valid-Until off: a mirror that is a dated snapshot serves sid's
	# Release file past its expiry (seen here), and apt then refuses it.
	chroot "$ROOT" sh -c "apt-get -o Acquire::Check-Valid-Until=false update && apt-get install -y --no-install-recommends \
		$pg_pkgs libssl-dev build-essential libipc-run-perl \
		python3-psycopg nodejs npm prometheus-postgres-exporter curl ca-certificates \
		libmicrohttpd-dev libcurl4-openssl-dev python3-boto3 awscli &&
		update-ca-certificates && npm config set cafile /etc/ssl/certs/ca-certificates.crt" \
		</dev/null >"$LOGDIR/chroot-install-$MAJOR.log" 2>&1 ||
		die "apt-get install in the chroot failed (log: $LOGDIR/chroot-install-$MAJOR.log)"
	touch "$ROOT/.installed-$MAJOR-sqs"
fi

# 3. The work tree, then make test.
say "copying $REPO to $ROOT/src"
rm -rf "$ROOT/src"
mkdir -p "$ROOT/src"
tar -C "$REPO" --exclude=.git --exclude=.test --exclude=node_modules \
	--exclude='*.o' --exclude='*.so' --exclude='*.bc' --exclude=.pg_config.stamp -cf - . |
	tar -C "$ROOT/src" -xf -
say "$(chroot "$ROOT" /usr/lib/postgresql/"$MAJOR"/bin/pg_config --version), make test"
set +e
chroot "$ROOT" sh -c "cd /src && make test PG_CONFIG=/usr/lib/postgresql/$MAJOR/bin/pg_config" </dev/null
rc=$?
set -e
say "make test exited $rc"
exit $rc
