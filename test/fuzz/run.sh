#!/usr/bin/env bash
# test/fuzz/run.sh - `make fuzz`: random calls of the queue API against a
# throwaway cluster.
#
# Starts its own cluster (as user postgres when run as root) with the
# extension preloaded, creates the extension, the queues the fuzzer aims at
# (standard, FIFO, a small one, dead-letter pairs of both kinds, with some
# messages in them) and the role fz_role (USAGE on schema queue, a few
# grants), runs test/fuzz/fuzz_calls.pl, checks the server log for a crash,
# and stops the cluster.  Exit status 0 only if the fuzzer found no XX000,
# P0001, crash or hang and the server never lost a backend.
#
# Environment (all optional):
#   FUZZ_ITERATIONS    calls to make (default 2000)
#   FUZZ_SEED          seed, to repeat a run (printed by the fuzzer)
#   FUZZ_CALL_TIMEOUT  seconds one call may take before it counts as a hang (30)
#   FUZZ_VERBOSE=1     print every call and its SQLSTATE
#   FUZZ_KEEP=1        keep the cluster's folder (logs) after the run
#   PG_CONFIG          which PostgreSQL (default: pg_config on PATH)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
PKGLIBDIR=$("$PG_CONFIG" --pkglibdir)
FUZZ_KEEP=${FUZZ_KEEP:-0}

die() { echo "fuzz: FAIL: $*" >&2; exit 1; }

[ -f "$PKGLIBDIR/queue.so" ] || die "$PKGLIBDIR/queue.so is missing: run make install"
command -v perl >/dev/null 2>&1 || die "perl is needed"

# Nothing from the caller's environment may point us at another server.
unset PGHOST PGHOSTADDR PGPORT PGDATABASE PGUSER PGPASSWORD PGSERVICE PGOPTIONS PGDATA

if [ "$(id -u)" = 0 ]; then
	id postgres >/dev/null 2>&1 || die "running as root needs an OS user 'postgres'"
	as_pg() { runuser -u postgres -- "$@"; }
else
	as_pg() { "$@"; }
fi

FUZZ_DIR=$(mktemp -d /tmp/queue-fuzz.XXXXXX)
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
		echo "fuzz: exit status $rc; last lines of the server log ($LOG):" >&2
		tail -n 30 "$LOG" >&2 || true
	fi
	if [ "$FUZZ_KEEP" = 1 ] || [ "$rc" != 0 ]; then
		echo "fuzz: kept $FUZZ_DIR" >&2
	else
		rm -rf "$FUZZ_DIR"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free port, from one derived from our pid down.
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && [ ! -e "/tmp/.s.PGSQL.$1" ]
}
PORT=$((20000 + $$ % 20000))
while ! port_free "$PORT"; do PORT=$((PORT + 1)); done

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
EOF
as_pg "$BINDIR/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null || die "the server did not start"

export PGHOST=$FUZZ_DIR PGPORT=$PORT PGUSER=postgres PGDATABASE=fuzz
PSQL=("$BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
as_pg "${PSQL[@]}" -d postgres -c 'CREATE DATABASE fuzz'
as_pg "${PSQL[@]}" >/dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION queue;
CREATE ROLE fz_role;
GRANT USAGE ON SCHEMA queue TO fz_role;
SELECT queue.create('fz_std');
SELECT queue.create('fz_fifo', fifo => true, content_based_deduplication => true);
SELECT queue.create('fz_small', max_message_size => 10, visibility_timeout => '0');
SELECT queue.create('fz_dlq');
SELECT queue.create('fz_src', dead_letter_queue => 'fz_dlq', max_receive_count => 2, visibility_timeout => '0');
SELECT queue.create('fz_fifo_dlq', fifo => true);
SELECT queue.create('fz_fifo_src', fifo => true, dead_letter_queue => 'fz_fifo_dlq', max_receive_count => 1,
	visibility_timeout => '0', deduplication_scope => 'message_group');
SELECT queue.grant('fz_std', 'fz_role', '{send, receive}');
CREATE FUNCTION public.fz_handler(msgs queue.message[]) RETURNS void LANGUAGE sql AS 'SELECT';
CREATE FUNCTION public.fz_not_handler(x int) RETURNS void LANGUAGE sql AS 'SELECT';
GRANT EXECUTE ON FUNCTION public.fz_handler(queue.message[]) TO fz_role;
SELECT queue.create_topic('fz_topic');
SELECT queue.create_topic('fz_topic_fifo', fifo => true);
SELECT queue.subscribe('fz_topic', 'fz_std');
SELECT queue.subscribe('fz_topic', 'fz_small', filter_tags => '{a}');
SELECT queue.subscribe('fz_topic', 'fz_src', binding_keys => '{a.*, #.b}',
					   filter_policy => '{"k": ["v", {"numeric": [">", 0]}], "$or": [{"a": [{"exists": true}]}, {"b": [{"prefix": "x"}]}]}');
SELECT queue.subscribe('fz_topic_fifo', 'fz_fifo');
SELECT queue.subscribe('fz_topic_fifo', 'fz_fifo_src');
SELECT queue.grant_topic('fz_topic', 'fz_role', '{publish}');
SELECT queue.grant('fz_fifo', 'fz_role', '{receive}');
SELECT queue.grant('fz_dlq', 'fz_role', '{manage}');
SELECT queue.grant('fz_small', 'public', '{send}');
SELECT count(*) FROM queue.send_batch('fz_std', ARRAY['a', 'b', 'c', 'd']);
SELECT count(*) FROM queue.send_batch('fz_fifo', ARRAY['a', 'b', 'c'], message_group_ids => ARRAY['g', 'g', 'h']);
SELECT count(*) FROM queue.send_batch('fz_src', ARRAY['a', 'b']);
SELECT count(*) FROM queue.send_batch('fz_fifo_src', ARRAY['a', 'b'], message_group_ids => ARRAY['g', 'h'],
	deduplication_ids => ARRAY['1', '2']);

-- Handlers that change their session (issue 23): a consumer process must
-- undo all of it after each batch.  Schema fz_evil shadows pg_catalog's
-- comparison and arithmetic operators with traps that WARN (the server
-- log keeps it) when a superuser runs them; the session handler's
-- consumers are made with fz_evil first in their search_path, so the
-- handler runs them as fz_role, and a leak would run them as the
-- process's superuser.
CREATE SCHEMA fz_evil;
GRANT USAGE ON SCHEMA fz_evil TO PUBLIC;
CREATE FUNCTION fz_evil.trap() RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
	IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user) THEN
		RAISE WARNING 'fuzz-trap: a superuser ran a shadowing operator';
	END IF;
END
$f$;
DO $do$
DECLARE
	r record;
	n integer := 0;
BEGIN
	FOR r IN SELECT o.oprname, o.oprleft::regtype AS l, o.oprright::regtype AS rt, o.oprresult::regtype AS res,
					p.proname
			 FROM pg_catalog.pg_operator o JOIN pg_catalog.pg_proc p ON p.oid = o.oprcode
			 WHERE o.oprnamespace = 'pg_catalog'::regnamespace AND o.oprkind = 'b'
			   AND o.oprname IN ('=', '<>', '<', '>', '<=', '>=', '+', '-', '*', '/', '||')
			   AND o.oprleft IN ('int4'::regtype, 'int8'::regtype, 'numeric'::regtype, 'text'::regtype,
								 'timestamptz'::regtype, 'interval'::regtype, 'oid'::regtype, 'bool'::regtype)
			   AND o.oprright IN ('int4'::regtype, 'int8'::regtype, 'numeric'::regtype, 'text'::regtype,
								  'timestamptz'::regtype, 'interval'::regtype, 'oid'::regtype, 'bool'::regtype)
	LOOP
		n := n + 1;
		EXECUTE format('CREATE FUNCTION fz_evil.op%s(a %s, b %s) RETURNS %s LANGUAGE plpgsql'
					   ' SET search_path = pg_catalog, pg_temp AS $x$BEGIN PERFORM fz_evil.trap();'
					   ' RETURN pg_catalog.%I(a, b); END$x$', n, r.l, r.rt, r.res, r.proname);
		EXECUTE format('CREATE OPERATOR fz_evil.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = fz_evil.op%s)',
					   r.oprname, r.l, r.rt, n);
	END LOOP;
END
$do$;
CREATE FUNCTION public.fz_h_session(msgs queue.message[]) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
	step text;
BEGIN
	FOREACH step IN ARRAY ARRAY[
		'SELECT set_config(''search_path'', ''fz_evil, pg_catalog'', false)',
		'SELECT set_config(''statement_timeout'', ''1'', false)',
		'SELECT set_config(''lock_timeout'', ''1'', false)',
		'SELECT set_config(''transform_null_equals'', ''on'', false)',
		'SELECT set_config(''default_transaction_read_only'', ''on'', false)',
		'SELECT pg_advisory_lock(7)', 'SET ROLE postgres', 'RESET ALL',
		'SET SESSION AUTHORIZATION postgres', 'CREATE TEMP TABLE fz_t (x int)',
		'SELECT 1::bigint = 1::bigint', 'DISCARD ALL', 'SET search_path = fz_evil, pg_catalog']
	LOOP
		IF random() < 0.6 THEN
			BEGIN
				EXECUTE step;
			EXCEPTION WHEN OTHERS THEN
				NULL;
			END;
		END IF;
	END LOOP;
	IF random() < 0.2 THEN
		RAISE EXCEPTION 'fz_h_session fails this batch' USING ERRCODE = 'P0002';
	END IF;
END
$f$;
GRANT EXECUTE ON FUNCTION public.fz_h_session(queue.message[]) TO fz_role;
SELECT queue.create('fz_session', visibility_timeout => '1 s', dead_letter_queue => 'fz_dlq', max_receive_count => 3);
SELECT queue.grant('fz_session', 'fz_role', '{receive}');
SET ROLE fz_role;
SET search_path = fz_evil, public, pg_catalog;
SELECT queue.create_consumer('fz_c_session', 'fz_std', 'public.fz_h_session(queue.message[])', batch_size => 3);
SELECT queue.create_consumer('fz_c_session2', 'fz_session', 'public.fz_h_session(queue.message[])',
	batch_size => 2, concurrency => 2, retry => 'fixed');
RESET search_path;
RESET ROLE;
SELECT count(*) FROM queue.send_batch('fz_session', ARRAY(SELECT 'm' || i FROM generate_series(1, 200) i));
SQL

# The postgres user may not reach the repository (a clone under /root):
# it runs a copy of the fuzzer from our own folder.
cp "$HERE/fuzz_calls.pl" "$FUZZ_DIR/fuzz_calls.pl"
chmod 644 "$FUZZ_DIR/fuzz_calls.pl"

rc=0
as_pg env PSQL="$BINDIR/psql" PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER="$PGUSER" PGDATABASE="$PGDATABASE" \
	FUZZ_ITERATIONS="${FUZZ_ITERATIONS:-2000}" ${FUZZ_SEED:+FUZZ_SEED="$FUZZ_SEED"} \
	FUZZ_CALL_TIMEOUT="${FUZZ_CALL_TIMEOUT:-30}" FUZZ_VERBOSE="${FUZZ_VERBOSE:-0}" \
	perl "$FUZZ_DIR/fuzz_calls.pl" || rc=$?

# No shadowing operator ran as a superuser (a consumer's handler changed
# its session and the process's own statements ran under it), and the
# session-changing consumers went on working.
if grep -q 'fuzz-trap' "$LOG"; then
	echo "fuzz: FAIL: a shadowing operator ran as a superuser:" >&2
	grep -B2 -A2 'fuzz-trap' "$LOG" | head -n 20 >&2
	rc=1
fi
# A short run can end before the worker has started the consumers (CI saw
# a 300-call run end within 2 s): give them up to 30 s to handle some.
for _ in $(seq 1 60); do
	handled=$(as_pg "${PSQL[@]}" -Atc "SELECT coalesce(sum(processed), 0) FROM queue.consumers WHERE consumer_name LIKE 'fz_c_session%'")
	[ "${handled:-0}" -gt 0 ] && break
	sleep 0.5
done
echo "fuzz: the session-changing consumers handled $handled messages"
if [ "${handled:-0}" -eq 0 ]; then
	echo "fuzz: FAIL: the session-changing consumers handled nothing" >&2
	rc=1
fi

# A backend that crashed shows in the server log even if our session lived.
if grep -qE 'terminated by signal|PANIC|TRAP:|server process .* was terminated' "$LOG"; then
	echo "fuzz: FAIL: the server log shows a crash:" >&2
	grep -E 'terminated by signal|PANIC|TRAP:|was terminated' "$LOG" | head -n 10 >&2
	rc=1
fi
# And the server still answers.
as_pg "${PSQL[@]}" -Atc 'SELECT count(*) FROM queue.queues' >/dev/null || {
	echo "fuzz: FAIL: the server does not answer after the run" >&2
	rc=1
}
exit "$rc"
