#!/usr/bin/env bash
# test/setup.sh: make sure this machine can build and test the extension.
#
# Checks for PGXS and the server headers, pg_regress / pg_isolation_regress,
# the PostgreSQL 15 server binaries, OpenSSL's headers when that PostgreSQL
# uses OpenSSL (src/common/hmac.c signs receipts with it), the `postgres` OS user,
# a C compiler, make, prove and
# perl's IPC::Run (the TAP tests need it), and what the examples suite and
# the exporter test run: Debian's /usr/bin/python3 with psycopg 3
# (python3-psycopg), node and npm, prometheus-postgres-exporter and curl, and
# what the SQS endpoint builds and is tested with: libmicrohttpd's header
# (libmicrohttpd-dev), boto3 (python3-boto3), the AWS CLI (awscli) and Celery
# with kombu's SQS transport (python3-celery, python3-kombu, python3-pycurl).
# When everything is present it
# returns at once without touching apt.  Otherwise, as root, it runs one
# `apt-get update` and installs the missing Debian packages without asking;
# as any other user it says what to install and exits 1.
#
# With PG_CONFIG naming another PostgreSQL (`make test PG_CONFIG=...`, for
# example one built by test/build_pg.sh), it checks that one's programs
# instead and installs no PostgreSQL package: a missing one is for
# test/build_pg.sh to build.
#
# Then it builds Citus 13.2.2 into that PostgreSQL when it is not there yet
# (test/citus_build.sh: once, cached in /var/cache/queue-citus, about 5
# minutes on 2 cores), for test/t/037_citus.pl.  A build that cannot run
# (not root and packages missing, no ../shared/vendor tarball) is reported
# and 037 skips, except in CI (CI=true), where it fails the set-up.
#
# Last, it installs node-postgres into examples/node/node_modules and the
# AWS SDK, sqs-consumer and sqs-producer into examples/sqs/node/node_modules (npm ci,
# from package-lock.json) when it is not there yet.
#
# Idempotent; never reads stdin.  Used by `make run`, `make test`, `.ci/run`.

set -euo pipefail

PG_MAJOR=15
PG_LIB=/usr/lib/postgresql/$PG_MAJOR
PG_BIN=$PG_LIB/bin
PGXS_TEST=$PG_LIB/lib/pgxs/src/test
PG_CONFIG=${PG_CONFIG:-pg_config}
other_pg=0
if [ "$PG_CONFIG" != pg_config ]; then
	other_pg=1
	[ -x "$PG_CONFIG" ] || {
		echo "setup: $PG_CONFIG not found (test/build_pg.sh builds 17 and 18)" >&2
		exit 1
	}
	PG_BIN=$("$PG_CONFIG" --bindir)
	PGXS_TEST=$(dirname "$("$PG_CONFIG" --pgxs)")/../test
fi

missing=()

pgxs=""
if command -v "$PG_CONFIG" >/dev/null 2>&1; then
	pgxs=$("$PG_CONFIG" --pgxs 2>/dev/null || true)
fi
if [ -z "$pgxs" ] || [ ! -f "$pgxs" ]; then
	missing+=("PGXS (pg_config --pgxs)")
fi
# PGXS's makefiles come with the client package; the headers do not.
server_inc=""
if command -v "$PG_CONFIG" >/dev/null 2>&1; then
	server_inc=$("$PG_CONFIG" --includedir-server 2>/dev/null || true)
fi
if [ -z "$server_inc" ] || [ ! -f "$server_inc/postgres.h" ]; then
	missing+=("${server_inc:-/server-headers}/postgres.h")
fi
for f in "$PGXS_TEST/regress/pg_regress" \
	"$PGXS_TEST/isolation/pg_isolation_regress" \
	"$PGXS_TEST/isolation/isolationtester" \
	"$PG_BIN/initdb" "$PG_BIN/postgres" "$PG_BIN/pg_ctl" "$PG_BIN/psql"; do
	[ -x "$f" ] || missing+=("$f")
done
id -u postgres >/dev/null 2>&1 || missing+=("OS user postgres")
command -v prove >/dev/null 2>&1 || missing+=("prove")
perl -MIPC::Run -e1 >/dev/null 2>&1 || missing+=("perl IPC::Run")
perl -MTest::More -e1 >/dev/null 2>&1 || missing+=("perl Test::More")

# The examples (examples/run.sh) and the exporter test (test/t/017_exporter.pl).
extra_pkgs=()
/usr/bin/python3 -I -c 'import psycopg' >/dev/null 2>&1 || { missing+=("python3 psycopg"); extra_pkgs+=(python3-psycopg); }
if ! command -v node >/dev/null 2>&1; then
	missing+=("node")
	extra_pkgs+=(nodejs npm)
elif ! command -v npm >/dev/null 2>&1; then
	missing+=("npm")
	extra_pkgs+=(npm)
fi
command -v prometheus-postgres-exporter >/dev/null 2>&1 ||
	{ missing+=("prometheus-postgres-exporter"); extra_pkgs+=(prometheus-postgres-exporter); }
command -v curl >/dev/null 2>&1 || { missing+=("curl"); extra_pkgs+=(curl); }
# The SQS endpoint (src/sqs/, library queue_sqs) and its tests.
[ -f /usr/include/microhttpd.h ] || { missing+=("libmicrohttpd headers"); extra_pkgs+=(libmicrohttpd-dev); }
# ... its forwards to the queue's node of a Citus cluster (src/sqs/forward.c),
# found by pkg-config (Debian's pkgconf), which a fresh machine may lack
command -v pkg-config >/dev/null 2>&1 || { missing+=("pkg-config"); extra_pkgs+=(pkgconf); }
compgen -G "/usr/include/*/curl/curl.h" >/dev/null || [ -f /usr/include/curl/curl.h ] ||
	{ missing+=("libcurl headers"); extra_pkgs+=(libcurl4-openssl-dev); }
/usr/bin/python3 -I -c 'import boto3' >/dev/null 2>&1 || { missing+=("python3 boto3"); extra_pkgs+=(python3-boto3); }
# Debian's AWS CLI, the one the tests run (a pyenv shim named aws on PATH is not it)
[ -x /usr/bin/aws ] || { missing+=("/usr/bin/aws"); extra_pkgs+=(awscli); }
/usr/bin/python3 -I -c 'import celery, kombu.transport.SQS, pycurl' >/dev/null 2>&1 ||
	{ missing+=("python3 celery/kombu"); extra_pkgs+=(python3-celery python3-kombu python3-pycurl); }
# src/common/hmac.c uses OpenSSL where PostgreSQL does (USE_OPENSSL in pg_config.h).
openssl_wanted() {
	[ -n "$server_inc" ] && grep -qs 'define USE_OPENSSL 1' "$server_inc/pg_config.h"
}
if openssl_wanted && [ ! -f /usr/include/openssl/evp.h ]; then
	missing+=("OpenSSL headers")
	extra_pkgs+=(libssl-dev)
fi

# node-postgres for examples/node and the AWS SDK for JavaScript for
# examples/sqs/node, each from its package-lock.json.  Done as the
# repository's owner would, whoever runs this; a failure is reported, and
# the examples that need it then fail in make test.
EXAMPLES=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/examples
# npm_ci DIR MODULE: npm ci in DIR unless node_modules/MODULE is there
npm_ci() {
	[ -f "$1/package-lock.json" ] || return 0
	[ -f "$1/node_modules/$2/package.json" ] && return 0
	command -v npm >/dev/null 2>&1 || { echo "setup: no npm for $1" >&2; return 1; }
	echo "setup: npm ci in $1"
	(cd "$1" && npm ci --no-audit --no-fund </dev/null) ||
		{ echo "setup: npm ci failed in $1" >&2; return 1; }
}
npm_examples() {
	local rc=0
	npm_ci "$EXAMPLES/node" pg || rc=1
	npm_ci "$EXAMPLES/sqs/node" sqs-consumer || rc=1
	return $rc
}

# Citus for 037_citus (test/citus_build.sh says how); see the header.
citus_for_tests() {
	local here
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	if PG_CONFIG="$PG_CONFIG" bash "$here/citus_build.sh" </dev/null; then
		return 0
	fi
	if [ "${CI:-}" = true ]; then
		echo "setup: building Citus failed: 037_citus cannot run" >&2
		return 1
	fi
	echo "setup: warning: Citus could not be built: 037_citus will be skipped" >&2
	return 0
}

need_cc=0
if ! command -v cc >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
	need_cc=1
	missing+=("cc/make")
fi

if [ ${#missing[@]} -eq 0 ]; then
	citus_for_tests || exit 1
	npm_examples
	exit
fi

if [ $other_pg -eq 1 ]; then
	for m in "${missing[@]}"; do
		case $m in
		/* | PGXS*)
			echo "setup: missing: ${missing[*]}" >&2
			echo "setup: $PG_CONFIG lacks them: rebuild it with test/build_pg.sh" >&2
			exit 1
			;;
		esac
	done
	pkgs=(libipc-run-perl)
else
	pkgs=("postgresql-$PG_MAJOR" "postgresql-server-dev-$PG_MAJOR" libipc-run-perl)
fi
[ $need_cc -eq 1 ] && pkgs+=(build-essential)
pkgs+=("${extra_pkgs[@]}")

echo "setup: missing: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
	echo "setup: not root; install them with:"
	echo "  sudo apt-get update && sudo apt-get install -y ${pkgs[*]}"
	exit 1
fi

# A fresh install of postgresql-NN would create and start a "main" cluster on
# port 5432 that nothing here uses; ask postgresql-common not to (only when
# the server package is not installed yet, so an existing setup is untouched).
if [ ! -x "$PG_BIN/postgres" ] && [ ! -e /etc/postgresql-common/createcluster.d/queue-no-main.conf ]; then
	mkdir -p /etc/postgresql-common/createcluster.d
	echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/queue-no-main.conf
fi

echo "setup: apt-get install ${pkgs[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update </dev/null
apt-get install -y --no-install-recommends \
	-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
	"${pkgs[@]}" </dev/null

# Check again: fail here, clearly, rather than later in make.
still=()
pgxs=$("$PG_CONFIG" --pgxs 2>/dev/null || true)
{ [ -n "$pgxs" ] && [ -f "$pgxs" ]; } || still+=("PGXS")
server_inc=$("$PG_CONFIG" --includedir-server 2>/dev/null || true)
[ -f "$server_inc/postgres.h" ] || still+=("server headers")
if openssl_wanted && [ ! -f /usr/include/openssl/evp.h ]; then still+=("OpenSSL headers"); fi
[ -x "$PGXS_TEST/isolation/pg_isolation_regress" ] || still+=("pg_isolation_regress")
[ -x "$PG_BIN/postgres" ] || still+=("postgres")
id -u postgres >/dev/null 2>&1 || still+=("OS user postgres")
perl -MIPC::Run -e1 >/dev/null 2>&1 || still+=("perl IPC::Run")
command -v cc >/dev/null 2>&1 || still+=("cc")
/usr/bin/python3 -I -c 'import psycopg' >/dev/null 2>&1 || still+=("python3 psycopg")
command -v node >/dev/null 2>&1 || still+=("node")
command -v prometheus-postgres-exporter >/dev/null 2>&1 || still+=("prometheus-postgres-exporter")
command -v curl >/dev/null 2>&1 || still+=("curl")
[ -f /usr/include/microhttpd.h ] || still+=("libmicrohttpd headers")
command -v pkg-config >/dev/null 2>&1 || still+=("pkg-config")
pkg-config --exists libcurl 2>/dev/null || still+=("libcurl headers")
/usr/bin/python3 -I -c 'import boto3' >/dev/null 2>&1 || still+=("python3 boto3")
command -v aws >/dev/null 2>&1 || still+=("aws")
if [ ${#still[@]} -ne 0 ]; then
	echo "setup: still missing after install: ${still[*]}" >&2
	exit 1
fi
citus_for_tests || exit 1
npm_examples || exit 1
echo "setup: done"
