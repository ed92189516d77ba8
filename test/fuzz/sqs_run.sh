#!/usr/bin/env bash
# test/fuzz/sqs_run.sh - `make fuzz` (and a short run in `make test`):
# random requests against the SQS endpoint (src/sqs/) of a throwaway
# cluster.
#
# Starts its own cluster (as user postgres when run as root) with the
# extension preloaded and the endpoint on (queue.sqs_listen, two workers),
# creates the queues the fuzzer aims at (standard, FIFO, a small one, a
# dead-letter pair, fz_lp for dropped long polls), role fz_app (USAGE, a
# few grants, its own schema queue_citus) and access keys for fz_app and for a superuser, runs
# test/fuzz/sqs_fuzz.py with Debian's python3 (its botocore signs), and
# stops the cluster.  Exit status 0 only if the fuzzer saw no violation
# (see sqs_fuzz.py: an answer that is not well-formed HTTP, a 500, a bad
# JSON or XML answer, a worker crash or restart, a hang, a message leased
# to nobody) and the server log shows no crash.  Without queue_sqs.so
# (no libmicrohttpd-dev at build time) or without python3-botocore it says
# so and exits 0.
#
# Environment (all optional):
#   FUZZ_ITERATIONS    requests to make (default 1000)
#   FUZZ_SEED          seed, to repeat a run (printed by the fuzzer)
#   FUZZ_VERBOSE=1     print every request
#   FUZZ_KEEP=1        keep the cluster's folder (logs) after the run
#   PG_CONFIG          which PostgreSQL (default: pg_config on PATH)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
PKGLIBDIR=$("$PG_CONFIG" --pkglibdir)
FUZZ_KEEP=${FUZZ_KEEP:-0}
PYTHON=/usr/bin/python3

die() { echo "sqs fuzz: FAIL: $*" >&2; exit 1; }

[ -f "$PKGLIBDIR/queue.so" ] || die "$PKGLIBDIR/queue.so is missing: run make install"
if [ ! -f "$PKGLIBDIR/queue_sqs.so" ]; then
	echo "sqs fuzz: skipped: $PKGLIBDIR/queue_sqs.so is not built (libmicrohttpd-dev is missing)"
	exit 0
fi
if ! env -u PYTHONPATH "$PYTHON" -I -c 'import botocore.auth' 2>/dev/null; then
	echo "sqs fuzz: skipped: $PYTHON has no botocore (python3-botocore)"
	exit 0
fi

unset PGHOST PGHOSTADDR PGPORT PGDATABASE PGUSER PGPASSWORD PGSERVICE PGOPTIONS PGDATA PYTHONPATH

if [ "$(id -u)" = 0 ]; then
	id postgres >/dev/null 2>&1 || die "running as root needs an OS user 'postgres'"
	as_pg() { runuser -u postgres -- "$@"; }
else
	as_pg() { "$@"; }
fi

FUZZ_DIR=$(mktemp -d /tmp/queue-sqs-fuzz.XXXXXX)
chmod 755 "$FUZZ_DIR"
[ "$(id -u)" = 0 ] && chown postgres: "$FUZZ_DIR"
DATA=$FUZZ_DIR/data
LOG=$FUZZ_DIR/server.log

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -f "$DATA/postmaster.pid" ]; then
		as_pg "$BINDIR/pg_ctl" -D "$DATA" -m fast -w -t 30 stop >/dev/null 2>&1 ||
			as_pg "$BINDIR/pg_ctl" -D "$DATA" -m immediate stop >/dev/null 2>&1 || true
	fi
	if [ "$rc" != 0 ] && [ -f "$LOG" ]; then
		echo "sqs fuzz: exit status $rc; last lines of the server log ($LOG):" >&2
		tail -n 30 "$LOG" >&2 || true
	fi
	if [ "$FUZZ_KEEP" = 1 ] || [ "$rc" != 0 ]; then
		echo "sqs fuzz: kept $FUZZ_DIR" >&2
	else
		rm -rf "$FUZZ_DIR"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Two free ports (PostgreSQL's socket, the endpoint), from one derived from our pid.
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && [ ! -e "/tmp/.s.PGSQL.$1" ]
}
PORT=$((20000 + $$ % 20000))
while ! port_free "$PORT"; do PORT=$((PORT + 1)); done
SQS_PORT=$((PORT + 1))
while ! port_free "$SQS_PORT"; do SQS_PORT=$((SQS_PORT + 1)); done

cd /
as_pg "$BINDIR/initdb" -D "$DATA" -U postgres -A trust -E UTF8 --no-locale >"$FUZZ_DIR/initdb.log" 2>&1 ||
	die "initdb failed: $(tail -n 5 "$FUZZ_DIR/initdb.log")"
as_pg tee -a "$DATA/postgresql.conf" >/dev/null <<EOF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$FUZZ_DIR'
shared_preload_libraries = 'queue'
max_worker_processes = 16
fsync = off
full_page_writes = off
synchronous_commit = off
log_min_messages = warning
log_min_error_statement = panic
restart_after_crash = on
queue.sqs_listen = '127.0.0.1:$SQS_PORT'
queue.sqs_workers = 2
queue.sqs_database = 'fuzz'
queue.sqs_account_id = '123456789012'
EOF
as_pg "$BINDIR/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null || die "the server did not start"

export PGHOST=$FUZZ_DIR PGPORT=$PORT PGUSER=postgres PGDATABASE=fuzz
PSQL=("$BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
as_pg "${PSQL[@]}" -d postgres -c 'CREATE DATABASE fuzz'
as_pg "${PSQL[@]}" >/dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION queue;
CREATE ROLE fz_app LOGIN;
CREATE ROLE fz_admin SUPERUSER LOGIN;
GRANT USAGE ON SCHEMA queue TO fz_app;
GRANT CREATE ON DATABASE fuzz TO fz_app;
SELECT queue.create('fz_std');
SELECT queue.create('fz_fifo.fifo', fifo => true, content_based_deduplication => true);
SELECT queue.create('fz_small', max_message_size => 10, visibility_timeout => '0');
SELECT queue.create('fz_dlq');
SELECT queue.create('fz_src', dead_letter_queue => 'fz_dlq', max_receive_count => 2, visibility_timeout => '0');
SELECT queue.create('fz_lp');
SELECT queue.create('fz_lock');
SELECT queue.grant('fz_std', 'fz_app', '{send, receive}');
SELECT queue.grant('fz_fifo.fifo', 'fz_app', '{receive}');
SELECT queue.grant('fz_dlq', 'fz_app', '{manage}');
SELECT queue.grant('fz_small', 'public', '{send}');
SELECT count(*) FROM queue.send_batch('fz_std', ARRAY['a', 'b', 'c', 'd']);
SELECT count(*) FROM queue.send_batch('fz_fifo.fifo', ARRAY['a', 'b', 'c'], message_group_ids => ARRAY['g', 'g', 'h']);
SELECT count(*) FROM queue.send_batch('fz_src', ARRAY['a', 'b']);
-- fz_app's own schema queue_citus, of the names the endpoint's Citus
-- forwarding reads (a table and a view over its function): never read
-- without Citus, so no request may fail because of it (issue 48)
SET ROLE fz_app;
CREATE SCHEMA queue_citus;
CREATE TABLE queue_citus.placements (placement_key text);
CREATE FUNCTION queue_citus.endpoints() RETURNS TABLE (node_group integer, endpoint text)
	LANGUAGE sql AS $$ SELECT g, 'http://127.0.0.1:1' FROM pg_catalog.generate_series(-1, 10) g $$;
CREATE VIEW queue_citus.sqs_endpoints AS SELECT * FROM queue_citus.endpoints();
RESET ROLE;
SQL
keys=$(as_pg "${PSQL[@]}" -At <<'SQL'
SELECT access_key_id || ' ' || secret_access_key FROM queue.create_access_key('fz_app');
SELECT access_key_id || ' ' || secret_access_key FROM queue.create_access_key('fz_admin');
SQL
)
read -r KEY SECRET ADMIN_KEY ADMIN_SECRET <<<"$(echo $keys)"
PM_PID=$(head -n 1 "$DATA/postmaster.pid")

# The endpoint's workers listen.
up=0
for _ in $(seq 1 100); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$SQS_PORT") 2>/dev/null; then up=1; break; fi
	sleep 0.1
done
[ "$up" = 1 ] || die "the SQS endpoint does not listen on $SQS_PORT"

# The postgres user may not reach the repository: a copy of the fuzzer.
cp "$HERE/sqs_fuzz.py" "$FUZZ_DIR/sqs_fuzz.py"
chmod 644 "$FUZZ_DIR/sqs_fuzz.py"

rc=0
as_pg env -u PYTHONPATH PSQL="$BINDIR/psql" PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER="$PGUSER" PGDATABASE="$PGDATABASE" \
	SQS_PORT="$SQS_PORT" SQS_KEY="$KEY" SQS_SECRET="$SECRET" SQS_ADMIN_KEY="$ADMIN_KEY" SQS_ADMIN_SECRET="$ADMIN_SECRET" \
	SQS_ACCOUNT=123456789012 PM_PID="$PM_PID" SERVER_LOG="$LOG" \
	FUZZ_ITERATIONS="${FUZZ_ITERATIONS:-1000}" ${FUZZ_SEED:+FUZZ_SEED="$FUZZ_SEED"} FUZZ_VERBOSE="${FUZZ_VERBOSE:-0}" \
	"$PYTHON" -I "$FUZZ_DIR/sqs_fuzz.py" || rc=$?

if grep -qE 'terminated by signal|PANIC|TRAP:|server process .* was terminated' "$LOG"; then
	echo "sqs fuzz: FAIL: the server log shows a crash:" >&2
	grep -E 'terminated by signal|PANIC|TRAP:|was terminated' "$LOG" | head -n 10 >&2
	rc=1
fi
as_pg "${PSQL[@]}" -Atc 'SELECT count(*) FROM queue.queues' >/dev/null || {
	echo "sqs fuzz: FAIL: the server does not answer after the run" >&2
	rc=1
}
exit "$rc"
