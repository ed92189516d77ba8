#!/usr/bin/env bash
# examples/run.sh: run the example programs against a database that already
# has `CREATE EXTENSION queue` (preloaded, for long polling), and say which
# passed.  Each program checks its own results and exits non-zero on failure.
#
#   PGHOST=/var/run/postgresql PGDATABASE=mydb bash examples/run.sh
#   DATABASE_URL=postgresql://app@db/mydb bash examples/run.sh python_consumer
#
# The connection comes from DATABASE_URL, or else from libpq's variables
# (PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD), which psycopg and
# node-postgres both read.  Arguments name the programs to run, as
# <language>_<program> (python_outbox_producer, node_fifo_consumer, ...);
# none runs them all; --list prints their names.  The programs create and drop their own queues and
# tables, prefixed py. / py_ and node. / node_.
#
# One line per program: "ok NAME (S s)" or "FAILED NAME", then its output
# when it failed; exit status 1 if any failed.  A missing interpreter or
# driver is a failure, not a skip.
#
# PYTHON (default /usr/bin/python3, Debian's, where python3-psycopg lives)
# and NODE (default node) choose the interpreters; node-postgres is read
# from examples/node/node_modules (npm ci there, test/setup.sh does it).

set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
NODE=${NODE:-node}

# Every python/*.py and node/*.js, in that order.
all=()
for f in "$HERE"/python/*.py; do [ -e "$f" ] && all+=("python_$(basename "$f" .py)"); done
for f in "$HERE"/node/*.js; do [ -e "$f" ] && all+=("node_$(basename "$f" .js)"); done
if [ "${1:-}" = --list ]; then
	printf '%s\n' "${all[@]}"
	exit 0
fi
if [ $# -gt 0 ]; then wanted=("$@"); else wanted=("${all[@]}"); fi

# Why a language cannot run, or nothing.
python_missing() {
	command -v "$PYTHON" >/dev/null 2>&1 || { echo "no $PYTHON"; return; }
	"$PYTHON" -I -c 'import psycopg' 2>/dev/null || echo "$PYTHON has no psycopg 3 (apt-get install python3-psycopg)"
}
node_missing() {
	command -v "$NODE" >/dev/null 2>&1 || { echo "no $NODE (apt-get install nodejs npm)"; return; }
	(cd "$HERE/node" && "$NODE" -e 'require("pg")' 2>/dev/null) ||
		echo "no node-postgres in $HERE/node/node_modules (npm ci there, or bash test/setup.sh)"
}

failed=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for name in "${wanted[@]}"; do
	case $name in
	python_*) lang=python prog=("$PYTHON" "$HERE/python/${name#python_}.py") why=$(python_missing) ;;
	node_*) lang=node prog=("$NODE" "$HERE/node/${name#node_}.js") why=$(node_missing) ;;
	*) echo "FAILED $name (no such example)"; failed=1; continue ;;
	esac
	if [ ! -f "${prog[1]}" ]; then
		echo "FAILED $name (no ${prog[1]})"
		failed=1
		continue
	fi
	if [ -n "$why" ]; then
		echo "FAILED $name ($lang: $why)"
		failed=1
		continue
	fi
	start=$(date +%s.%N)
	# Each program gets 120 s at most: a hung example must not hang make test.
	if (cd "$HERE/$lang" && timeout -s INT -k 10 120 "${prog[@]}") >"$out" 2>&1; then
		echo "ok $name ($(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s)"
	else
		echo "FAILED $name"
		sed 's/^/    /' "$out"
		failed=1
	fi
done
exit $failed
