#!/usr/bin/env bash
# test/run_demo.sh: the throwaway cluster of `make run` / `make stop`.
#
#   bash test/run_demo.sh         create (if absent) and start the cluster,
#                                 install the extension, run a short demo,
#                                 print the psql command that connects
#   bash test/run_demo.sh stop    stop it (fine if it is not running)
#
# The cluster lives in .run/ in the repository (git-ignored), owned by the
# postgres OS user when we are root (initdb and postgres refuse root).  When
# postgres cannot reach the repository (a clone under /root, say) the data
# directory goes to /tmp/queue-run-<hash of the repo path> instead; .run/env
# records where, and the port, so later runs reuse both.  The port is the
# one QUEUE_RUN_PORT names (`make run PORT=5499`), else a free one derived
# from the repository's path; a running cluster on another port is
# restarted on the one asked for.  Authentication is
# trust for local connections; the server listens on localhost and on a Unix
# socket.  Running it again reuses the running server, restarting it only
# when `make install` has put a different queue.so in place.  To start from
# scratch: `make stop && rm -rf .run` (and the /tmp directory .run/env names).

set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
PKGLIBDIR=$("$PG_CONFIG" --pkglibdir)
RUN=$REPO/.run
ENVFILE=$RUN/env
HASH=$(printf '%s' "$REPO" | md5sum | cut -c1-8)
ALT=/tmp/queue-run-$HASH

unset PGHOST PGHOSTADDR PGPORT PGDATABASE PGUSER PGSERVICE PGOPTIONS PGDATA

if [ "$(id -u)" -eq 0 ]; then
	id -u postgres >/dev/null 2>&1 || {
		echo "run_demo: no OS user postgres (run test/setup.sh)" >&2
		exit 1
	}
	RUN_USER=postgres
else
	RUN_USER=$(id -un)
fi
RUN_GROUP=$(id -gn "$RUN_USER")
as_run() {
	if [ "$RUN_USER" = "$(id -un)" ]; then
		"$@"
	else
		runuser -u "$RUN_USER" -- "$@"
	fi
}
# The server user may not be able to enter the caller's directory.
cd /

pg_running() {
	[ -f "$DATA/PG_VERSION" ] && as_run "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

# port_free PORT: nothing listens on it over TCP or on a known socket.
port_free() {
	local p=$1 d
	(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && return 1
	(exec 3<>"/dev/tcp/::1/$p") 2>/dev/null && return 1
	for d in /tmp /var/run/postgresql "$SOCK"; do
		[ -e "$d/.s.PGSQL.$p" ] && return 1
	done
	return 0
}

# pick_port: a free port, starting from one derived from the repo path so
# that two clones rarely race for the same one.
pick_port() {
	local p=$((5433 + 0x${HASH:0:4} % 500))
	for _ in $(seq 1 1000); do
		if port_free "$p"; then
			echo "$p"
			return
		fi
		p=$((p + 1))
		[ "$p" -gt 65000 ] && p=5433
	done
	echo "run_demo: no free port found" >&2
	exit 1
}

# Where the cluster lives: .run/env if an earlier run recorded it.
DATA="" SOCK="" PORT=""
if [ -f "$ENVFILE" ]; then
	DATA=$(sed -n 's/^DATA=//p' "$ENVFILE")
	SOCK=$(sed -n 's/^SOCK=//p' "$ENVFILE")
	PORT=$(sed -n 's/^PORT=//p' "$ENVFILE")
fi

if [ "${1:-}" = stop ]; then
	if [ -n "$DATA" ] && pg_running; then
		as_run "$BINDIR/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
		echo "run_demo: stopped the cluster in $DATA"
	else
		echo "run_demo: no cluster running"
	fi
	exit 0
elif [ $# -gt 0 ]; then
	echo "usage: bash test/run_demo.sh [stop]" >&2
	exit 2
fi

[ -x "$PKGLIBDIR/queue.so" ] || {
	echo "run_demo: $PKGLIBDIR/queue.so is missing: run make install" >&2
	exit 1
}

# First run, or the data directory vanished (/tmp cleaned): lay it out.
if [ -z "$DATA" ] || [ ! -f "$DATA/PG_VERSION" ]; then
	mkdir -p "$RUN"
	[ "$RUN_USER" != "$(id -un)" ] && chown "$RUN_USER:$RUN_GROUP" "$RUN"
	# Unix socket paths are limited to 107 bytes.
	if as_run test -w "$RUN" -a -x "$RUN" && [ ${#RUN} -le 90 ]; then
		DATA=$RUN/data
		SOCK=$RUN
	else
		echo "run_demo: $RUN is not usable by $RUN_USER; the cluster goes to $ALT"
		mkdir -p "$ALT"
		chown "$RUN_USER:$RUN_GROUP" "$ALT"
		chmod 755 "$ALT"
		DATA=$ALT/data
		SOCK=$ALT
	fi
	if [ -n "${QUEUE_RUN_PORT:-}" ]; then
		PORT=$QUEUE_RUN_PORT
	elif [ -z "$PORT" ] || ! port_free "$PORT"; then
		PORT=$(pick_port)
	fi
	rm -rf "$DATA"
	echo "run_demo: initdb $DATA"
	as_run "$BINDIR/initdb" -D "$DATA" -U postgres -A trust -E UTF8 --no-locale \
		>"$RUN/initdb.log" 2>&1 || {
		cat "$RUN/initdb.log" >&2
		exit 1
	}
	echo "include = 'run_demo.conf'" | as_run tee -a "$DATA/postgresql.conf" >/dev/null
	rm -f "$RUN/started_lib.sha256" "$RUN/created_sql.sha256"
elif [ -n "${QUEUE_RUN_PORT:-}" ] && [ "$QUEUE_RUN_PORT" != "$PORT" ]; then
	if pg_running; then
		echo "run_demo: restarting the cluster on port $QUEUE_RUN_PORT (it ran on $PORT)"
		as_run "$BINDIR/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
	fi
	PORT=$QUEUE_RUN_PORT
elif ! pg_running && ! port_free "$PORT"; then
	old=$PORT
	PORT=$(pick_port)
	echo "run_demo: port $old is taken now; using $PORT"
fi
LOG=$(dirname "$DATA")/server.log

printf 'DATA=%s\nSOCK=%s\nPORT=%s\n' "$DATA" "$SOCK" "$PORT" >"$ENVFILE"

# Rewritten on every run, read by the include above.
as_run tee "$DATA/run_demo.conf" >/dev/null <<EOF
# written by test/run_demo.sh on every run
port = $PORT
listen_addresses = 'localhost'
unix_socket_directories = '$SOCK'
shared_preload_libraries = 'queue'
max_prepared_transactions = 10
# the launcher, one worker per database with the extension, up to
# queue.max_consumer_processes (8) consumer processes, parallel query's 8
max_worker_processes = 24
EOF

lib_sum=$(sha256sum "$PKGLIBDIR/queue.so" | cut -d' ' -f1)
if pg_running; then
	if [ "$(cat "$RUN/started_lib.sha256" 2>/dev/null)" != "$lib_sum" ]; then
		echo "run_demo: queue.so changed since the server started; restarting"
		as_run "$BINDIR/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
	else
		echo "run_demo: reusing the running cluster in $DATA"
	fi
fi
if ! pg_running; then
	echo "run_demo: starting the cluster on port $PORT (log: $LOG)"
	if ! as_run "$BINDIR/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null; then
		echo "run_demo: the server did not start; end of $LOG:" >&2
		tail -n 30 "$LOG" >&2
		exit 1
	fi
	echo "$lib_sum" >"$RUN/started_lib.sha256"
fi

PSQL=("$BINDIR/psql" -X -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U postgres)
# The extension's install scripts changed since it was created here (same
# version, new script: normal while developing): recreate it, dropping the
# demo's queues, so the demo runs against the SQL just installed.
SHAREDIR=$("$PG_CONFIG" --sharedir)
sql_sum=$(cat "$SHAREDIR/extension/queue.control" "$SHAREDIR"/extension/queue--*.sql | sha256sum | cut -d' ' -f1)
if [ "$(cat "$RUN/created_sql.sha256" 2>/dev/null)" != "$sql_sum" ] &&
	[ "$("${PSQL[@]}" -Atq -d postgres -c "SELECT count(*) FROM pg_extension WHERE extname = 'queue'")" = 1 ]; then
	echo "run_demo: the extension's SQL changed since it was created here; recreating it"
	"${PSQL[@]}" -q -d postgres -c 'SET client_min_messages = warning' \
		-c 'DROP EXTENSION queue CASCADE' || {
		echo "run_demo: could not drop it; start over with: make stop && rm -rf .run" >&2
		exit 1
	}
fi
"${PSQL[@]}" -q -d postgres -c 'SET client_min_messages = warning' \
	-c 'CREATE EXTENSION IF NOT EXISTS queue'
echo "$sql_sum" >"$RUN/created_sql.sha256"

echo
echo "=== demo ==="
"${PSQL[@]}" -q -d postgres <<'SQL'
\pset footer off
\echo '-- create the queue (same attributes: returns the same id) and empty it'
SELECT queue.create('demo') AS queue_id;
SELECT queue.purge('demo') AS purged;

\echo '-- send inside a transaction: consumers see it once it commits'
BEGIN;
SELECT message_id, duplicate
  FROM queue.send('demo', '{"order": 42, "item": "book"}'::jsonb);
COMMIT;

\echo '-- receive: invisible to other consumers for 30 s; keep the receipt'
CREATE TEMP TABLE got AS
  SELECT * FROM queue.receive('demo', visibility_timeout => '30 seconds');
SELECT message_id, body, receive_count, left(receipt, 12) || '...' AS receipt
  FROM got;

\echo '-- delete it with its receipt'
SELECT queue.delete('demo', receipt) AS deleted FROM got;

\echo '-- a topic: one publish, a copy in every subscribed queue whose filters match'
SELECT queue.create_topic('demo_orders') AS topic_id;
SELECT queue.create('demo_eu') AS queue_id;
SELECT queue.purge('demo_eu') AS purged;
SELECT queue.subscribe('demo_orders', 'demo') AS subscription_id;
SELECT queue.subscribe('demo_orders', 'demo_eu', filter_tags => '{eu}') AS subscription_id;
SELECT delivered FROM queue.publish('demo_orders', 'order 43 (us)', tags => '{us}');
SELECT delivered FROM queue.publish('demo_orders', 'order 44 (eu)', tags => '{eu}');
SELECT queue_name, body FROM queue.queues q, LATERAL queue.peek(q.queue_name) m
 WHERE q.queue_name IN ('demo', 'demo_eu') ORDER BY 1, m.message_id;
SELECT queue.purge('demo') AS purged;

\echo '-- a consumer: the worker receives, calls a SQL function with the batch, deletes and commits'
CREATE TABLE IF NOT EXISTS demo_shipped (body text, shipped_at timestamptz DEFAULT now());
TRUNCATE demo_shipped;
CREATE OR REPLACE FUNCTION demo_ship(msgs queue.message[]) RETURNS void LANGUAGE sql AS
  'INSERT INTO public.demo_shipped (body) SELECT m.body FROM pg_catalog.unnest(msgs) m';
SELECT queue.create('demo_jobs') AS queue_id;
SELECT queue.create_consumer('demo_shipper', 'demo_jobs', 'demo_ship(queue.message[])') AS consumer_id;
SELECT message_id FROM queue.send('demo_jobs', 'ship order 45');
DO $$
BEGIN
	FOR i IN 1 .. 200 LOOP  -- the consumer is woken by the commit; wait up to 10 s
		EXIT WHEN EXISTS (SELECT FROM public.demo_shipped);
		PERFORM pg_sleep(0.05);
	END LOOP;
END
$$;
SELECT body AS shipped FROM demo_shipped;
SELECT consumer_name, queue_name, state, processed FROM queue.consumers;

\echo '-- queue.stats'
\x on
SELECT * FROM queue.stats WHERE queue_name = 'demo';
SQL

echo
echo "Stop with: make stop"
echo "Connect with:"
echo "psql -h $SOCK -p $PORT -U postgres postgres"
