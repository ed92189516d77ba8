#!/usr/bin/env bash
# test/bench/idle_worker.sh - the queue worker's CPU with many idle queues.
#
# Starts a throwaway cluster (as user postgres when run as root) with the
# extension preloaded and otherwise default settings, creates IDLE_QUEUES
# queues (1000) that nobody uses, lets the worker settle, then reads the
# worker's and the launcher's CPU time (/proc/<pid>/stat, user + system)
# over IDLE_SECS seconds (30).  Prints one line per process, in percent of
# one core.  Nothing is asserted.
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
N=${IDLE_QUEUES:-1000}
SECS=${IDLE_SECS:-30}

if [ "$(id -u)" = 0 ]; then as_pg() { runuser -u postgres -- "$@"; }; else as_pg() { "$@"; }; fi
DIR=$(mktemp -d /tmp/queue-idle.XXXXXX)
chmod 755 "$DIR"
[ "$(id -u)" = 0 ] && chown postgres: "$DIR"
PORT=$((56000 + RANDOM % 900))
stop() { as_pg "$BINDIR/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null 2>&1 || true; rm -rf "$DIR"; }
trap stop EXIT

as_pg "$BINDIR/initdb" -D "$DIR/data" -A trust -U postgres >/dev/null
cat >>"$DIR/data/postgresql.conf" <<CONF
shared_preload_libraries = 'queue'
port = $PORT
listen_addresses = ''
unix_socket_directories = '$DIR'
CONF
as_pg "$BINDIR/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w start >/dev/null
psql_q() { "$BINDIR/psql" -h "$DIR" -p "$PORT" -U postgres -X -q -At "$@"; }
psql_q -c "CREATE EXTENSION queue" 2>/dev/null
for i in $(seq 1 "$N"); do echo "SELECT queue.create('idle_$i');"; done | psql_q >/dev/null
sleep 5
worker=$(psql_q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue worker'")
launcher=$(psql_q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue launcher'")
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
w0=$(ticks "$worker"); l0=$(ticks "$launcher")
sleep "$SECS"
w1=$(ticks "$worker"); l1=$(ticks "$launcher")
hz=$(getconf CLK_TCK)
awk -v n="$N" -v s="$SECS" -v hz="$hz" -v w="$((w1 - w0))" -v l="$((l1 - l0))" 'BEGIN {
	printf "BENCH idle_worker_cpu %.3f %%_of_a_core (%d idle queues, %d s)\n", w * 100 / hz / s, n, s
	printf "BENCH idle_launcher_cpu %.3f %%_of_a_core\n", l * 100 / hz / s }'
