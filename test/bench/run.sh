#!/usr/bin/env bash
# test/bench/run.sh - `make bench`: the queue extension against the floor.
#
# Starts its own throwaway cluster (as user postgres when run as root), prints
# the machine and the settings, and measures with pgbench custom scripts
# (test/bench/*.sql, -M prepared) the full message cycle send -> receive ->
# delete, each step its own autocommit statement, for:
#   floor  a hand-written queue on a plain table (bench_floor: bigserial pk,
#          index on (visible_at, id); receive = UPDATE ... WHERE id IN
#          (SELECT ... FOR UPDATE SKIP LOCKED LIMIT n) RETURNING id)
#   std    the extension's standard queue (queue.send / send_batch, receive,
#          delete / delete_batch with the receipts just got)
# at each client count and batch size.  Every figure is the median of RUNS
# runs; each run starts from a freshly made queue holding PREFILL visible
# messages, and afterwards the script checks that every message a cycle
# received was deleted.  Results are lines
#   BENCH <name> <value> msgs/s <ratio to the floor of the same shape>
# followed by a summary table.  Nothing is asserted: figures are printed.
#
# Environment (all optional):
#   QUICK=1            smoke reading: 1 run of 3 s per figure
#   RUNS, SECS         runs per figure (default 3) and seconds per run (10)
#   CLIENTS, BATCHES   lists (default "1 8" and "1 10")
#   PREFILL            messages waiting in each queue at the start (1000)
#   BODY_BYTES         message body size (100)
#   SYNC_COMMIT        synchronous_commit of the cluster (on)
#   BENCH_FLOOR_ONLY=1 measure the floor only; the extension may be missing
#   BENCH_KEEP=1       keep the cluster's folder (logs) after the run
#   PG_CONFIG          which PostgreSQL (default: pg_config on PATH)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
PKGLIBDIR=$("$PG_CONFIG" --pkglibdir)

QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
	RUNS=${RUNS:-1}
	SECS=${SECS:-3}
else
	RUNS=${RUNS:-3}
	SECS=${SECS:-10}
fi
CLIENTS=${CLIENTS:-"1 8"}
BATCHES=${BATCHES:-"1 10"}
PREFILL=${PREFILL:-1000}
BODY_BYTES=${BODY_BYTES:-100}
SYNC_COMMIT=${SYNC_COMMIT:-on}
BENCH_FLOOR_ONLY=${BENCH_FLOOR_ONLY:-0}
BENCH_KEEP=${BENCH_KEEP:-0}
QUEUE=bench
BODY=$(head -c "$BODY_BYTES" /dev/zero | tr '\0' 'x')

die() { echo "bench: FAIL: $*" >&2; exit 1; }

# --- the throwaway cluster ---------------------------------------------------

if [ "$(id -u)" = 0 ]; then
	id postgres >/dev/null 2>&1 || die "running as root needs an OS user 'postgres'"
	as_pg() { runuser -u postgres -- "$@"; }
else
	as_pg() { "$@"; }
fi

BENCH_DIR=$(mktemp -d /tmp/queue-bench.XXXXXX)
[ "$(id -u)" = 0 ] && chown postgres: "$BENCH_DIR"
DATA=$BENCH_DIR/data
LOG=$BENCH_DIR/server.log

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -f "$DATA/postmaster.pid" ]; then
		as_pg "$BINDIR/pg_ctl" -D "$DATA" -m fast -w -t 30 stop >/dev/null 2>&1 ||
			as_pg "$BINDIR/pg_ctl" -D "$DATA" -m immediate stop >/dev/null 2>&1 || true
	fi
	if [ "$rc" != 0 ] && [ -f "$LOG" ]; then
		echo "bench: exit status $rc; last lines of the server log:" >&2
		tail -n 20 "$LOG" >&2 || true
	fi
	if [ "$BENCH_KEEP" = 1 ]; then
		echo "bench: kept $BENCH_DIR"
	else
		rm -rf "$BENCH_DIR"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_free() {
	[ -z "$(ss -Htln "sport = :$1" 2>/dev/null)" ] &&
		[ ! -e "/tmp/.s.PGSQL.$1" ] && [ ! -e "/var/run/postgresql/.s.PGSQL.$1" ]
}
PORT=${BENCH_PORT:-}
if [ -z "$PORT" ]; then
	for p in $(seq $((55432 + RANDOM % 500)) 56999); do
		if port_free "$p"; then PORT=$p; break; fi
	done
	[ -n "$PORT" ] || die "no free port in 55432..56999"
fi

PRELOAD="'queue'"
if [ ! -f "$PKGLIBDIR/queue.so" ]; then
	[ "$BENCH_FLOOR_ONLY" = 1 ] || die "$PKGLIBDIR/queue.so is not installed (run make install, or BENCH_FLOOR_ONLY=1)"
	PRELOAD="''"
fi

as_pg "$BINDIR/initdb" -D "$DATA" -A trust -U postgres -E UTF8 --locale=C >"$BENCH_DIR/initdb.log" 2>&1 ||
	{ cat "$BENCH_DIR/initdb.log" >&2; die "initdb failed"; }
cat >>"$DATA/postgresql.conf" <<EOF

# --- queue bench (test/bench/run.sh) ---
port = $PORT
listen_addresses = ''
unix_socket_directories = '$BENCH_DIR'
shared_preload_libraries = $PRELOAD
shared_buffers = 1GB
max_connections = 60
synchronous_commit = $SYNC_COMMIT
max_wal_size = 4GB
EOF
as_pg "$BINDIR/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null || die "the server did not start"

PSQL=("$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$BENCH_DIR" -p "$PORT" -U postgres -d postgres)
psql_val() { "${PSQL[@]}" -At -c "$1"; }

# --- machine and settings ----------------------------------------------------

echo "== machine"
echo "cores:      $(nproc)"
echo "cpu:        $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
echo "memory:     $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "kernel:     $(uname -sr)"
echo "server:     $(psql_val 'SELECT version()')"
echo "pgbench:    $("$BINDIR/pgbench" --version)"
echo "source:     $(git -C "$HERE" describe --always --dirty 2>/dev/null || echo unknown)"
echo "date:       $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "== settings"
"${PSQL[@]}" -At -F ' = ' -c "
	SELECT name, current_setting(name) FROM pg_settings
	 WHERE name IN ('shared_buffers', 'max_connections', 'synchronous_commit', 'fsync',
	                'wal_level', 'max_wal_size', 'checkpoint_timeout', 'autovacuum',
	                'shared_preload_libraries', 'jit')
	 ORDER BY name"
echo "runs:       $RUNS x ${SECS}s per figure (median); clients: $CLIENTS; batches: $BATCHES"
echo "queues:     $PREFILL messages waiting at the start of each run; body $BODY_BYTES bytes"
echo "pgbench:    pgbench -n -M prepared -T $SECS -c <clients> -j <clients> -f test/bench/<script>.sql"

EXT=1
if [ "$BENCH_FLOOR_ONLY" = 1 ]; then
	EXT=0
	echo "SKIP extension: BENCH_FLOOR_ONLY=1, measuring the floor only"
else
	"${PSQL[@]}" -c 'CREATE EXTENSION queue' 2>"$BENCH_DIR/ext.err" ||
		die "CREATE EXTENSION queue: $(cat "$BENCH_DIR/ext.err") (set BENCH_FLOOR_ONLY=1 to measure the floor alone)"
	echo "extension:  queue $(psql_val "SELECT extversion FROM pg_extension WHERE extname = 'queue'")"
fi

# --- per-run setup and checks ------------------------------------------------

# A fresh hand-written queue with PREFILL visible messages.
reset_floor() {
	"${PSQL[@]}" -v body="$BODY" >/dev/null <<EOF
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_floor;
CREATE TABLE bench_floor (
	id            bigserial PRIMARY KEY,
	visible_at    timestamptz NOT NULL DEFAULT now(),
	body          text NOT NULL,
	receive_count int NOT NULL DEFAULT 0);
CREATE INDEX bench_floor_visible ON bench_floor (visible_at, id);
INSERT INTO bench_floor (visible_at, body) SELECT now(), :'body' FROM generate_series(1, $PREFILL);
VACUUM ANALYZE bench_floor;
CHECKPOINT;
EOF
}

# A fresh standard queue with PREFILL visible messages (send_batch takes at
# most 1000 bodies, so fill in chunks).
reset_std() {
	"${PSQL[@]}" -v body="$BODY" >/dev/null <<EOF
SET client_min_messages = warning;
SELECT queue.drop('$QUEUE', if_exists => true);
SELECT queue.create('$QUEUE');
SELECT count(*) FROM generate_series(0, ($PREFILL - 1) / 1000) AS g,
	LATERAL queue.send_batch('$QUEUE', array_fill(:'body'::text, ARRAY[least(1000, $PREFILL - g * 1000)]));
VACUUM ANALYZE;
CHECKPOINT;
EOF
}

# After a run with N cycles of batch b, every message sent must have been
# received and deleted: N*b sent, PREFILL still waiting, none in flight.  So a
# receive that came back short, a delete that missed, or a cycle cut off half
# way shows here.  A mismatch is printed (WARN) and counted, not fatal.
CHECKS_FAILED=0
check_result() {	# NAME GOT EXPECTED
	if [ "$2" != "$3" ]; then
		echo "WARN $1: after the run $CHECK_WHAT = $2, expected $3"
		CHECKS_FAILED=$((CHECKS_FAILED + 1))
	fi
}
check_floor() {	# NAME CYCLES BATCH
	CHECK_WHAT="visible/in-flight/sent"
	check_result "$1" "$(psql_val "
		SELECT count(*) FILTER (WHERE visible_at <= now()) || ' ' ||
		       count(*) FILTER (WHERE visible_at > now()) || ' ' ||
		       (SELECT last_value - $PREFILL FROM bench_floor_id_seq)
		  FROM bench_floor")" "$PREFILL 0 $(($2 * $3))"
}
check_std() {	# NAME CYCLES BATCH
	local got
	CHECK_WHAT="visible/in-flight/sent/deleted"
	got=$(psql_val "SELECT visible || ' ' || in_flight || ' ' || coalesce((sent - $PREFILL)::text, '?')
	                       || ' ' || coalesce(deleted::text, '?')
	                  FROM queue.stats WHERE queue_name = '$QUEUE'" 2>&1) ||
		got="(cannot read queue.stats: $got)"
	check_result "$1" "$got" "$PREFILL 0 $(($2 * $3)) $(($2 * $3))"
}

# run_pgbench SCRIPT CLIENTS BATCH -> sets TPS (cycles per second) and
# CYCLES (cycles run).
run_pgbench() {
	local script=$1 c=$2 b=$3 out
	out=$("$BINDIR/pgbench" -n -M prepared -T "$SECS" -c "$c" -j "$c" \
		-h "$BENCH_DIR" -p "$PORT" -U postgres \
		-D queue="$QUEUE" -D body="$BODY" -D batch="$b" \
		-f "$HERE/$script" postgres 2>&1) || {
		echo "$out" >&2
		die "pgbench $script -c $c failed"
	}
	TPS=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")
	CYCLES=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
	[ -n "$TPS" ] && [ -n "$CYCLES" ] || { echo "$out" >&2; die "no tps in pgbench output"; }
	if grep -q 'number of failed transactions: [1-9]' <<<"$out"; then
		echo "$out" >&2
		die "pgbench $script -c $c had failed transactions"
	fi
}

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END {
	if (NR % 2) m = v[(NR + 1) / 2]; else m = (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.0f\n", m }'; }

# --- measurements --------------------------------------------------------------

declare -A RES RUNSOF
SHAPES=()

# one_run KIND SHAPE CLIENTS BATCH: a fresh queue, one pgbench run; appends the
# msgs/s to RUNSOF[kind].
one_run() {
	local kind=$1 shape=$2 c=$3 b=$4 sfx=bn m
	if [ "$b" = 1 ]; then sfx=b1; fi
	"reset_$kind"
	run_pgbench "${kind}_$sfx.sql" "$c" "$b"
	"check_$kind" "cycle_${kind}_$shape" "$CYCLES" "$b"
	m=$(awk -v t="$TPS" -v b="$b" 'BEGIN { printf "%.0f", t * b }')
	RUNSOF[$kind]+=" $m"
	echo "  run $r/$RUNS cycle_${kind}_$shape: $m msgs/s"
}

echo "== full cycle send -> receive -> delete (msgs/s = cycles/s x batch)"
for c in $CLIENTS; do
	for b in $BATCHES; do
		shape="c${c}_b${b}"
		SHAPES+=("$shape")
		RUNSOF=([floor]="" [std]="")
		# Runs of the two alternate, first one then the other first, so
		# drift in the machine falls on both alike.
		for r in $(seq 1 "$RUNS"); do
			if [ "$EXT" = 0 ]; then
				one_run floor "$shape" "$c" "$b"
			elif [ $((r % 2)) = 1 ]; then
				one_run floor "$shape" "$c" "$b"
				one_run std "$shape" "$c" "$b"
			else
				one_run std "$shape" "$c" "$b"
				one_run floor "$shape" "$c" "$b"
			fi
		done
		f=$(median <<<"${RUNSOF[floor]}")
		RES[floor_$shape]=$f
		echo "BENCH cycle_floor_$shape $f msgs/s 1.00"
		if [ "$EXT" = 1 ]; then
			s=$(median <<<"${RUNSOF[std]}")
			RES[std_$shape]=$s
			echo "BENCH cycle_std_$shape $s msgs/s $(awk -v s="$s" -v f="$f" 'BEGIN { printf "%.2f", s / f }')"
		else
			echo "SKIP cycle_std_$shape (extension not measured)"
		fi
	done
done

# --- summary -------------------------------------------------------------------

echo "== summary: full cycle, msgs/s, median of $RUNS x ${SECS}s, synchronous_commit=$SYNC_COMMIT"
printf '%-10s %12s %12s %10s\n' shape floor std std/floor
for shape in "${SHAPES[@]}"; do
	f=${RES[floor_$shape]}
	if [ "$EXT" = 1 ]; then
		s=${RES[std_$shape]}
		printf '%-10s %12s %12s %10s\n' "$shape" "$f" "$s" "$(awk -v s="$s" -v f="$f" 'BEGIN { printf "%.2f", s / f }')"
	else
		printf '%-10s %12s %12s %10s\n' "$shape" "$f" - -
	fi
done
if [ "$CHECKS_FAILED" != 0 ]; then
	echo "WARN $CHECKS_FAILED run(s) failed their checks (see WARN lines above): their figures are suspect"
fi
