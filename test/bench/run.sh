#!/usr/bin/env bash
# test/bench/run.sh - `make bench`: the queue extension against the floor.
#
# Starts its own throwaway cluster (as user postgres when run as root),
# prints the machine and the settings, and measures, in that one run, with
# pgbench custom scripts (test/bench/*.sql, -M prepared) and the long-poll
# driver (test/bench/longpoll.c):
#
#  1. per synchronous_commit setting (SYNC_COMMITS, set per connection):
#     a. each operation alone, at OP_CLIENTS x OP_BATCHES:
#        the floor (a), a hand-written queue on a plain table, in two variants
#          pk   the primary key alone, receive in id order
#          idx  plus an index on (visible_at, id), receive in that order
#        (the figure of floor (a) is the better of the two):
#          insert   INSERT (a multi-row INSERT for batch > 1)
#          receive  UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED
#                   LIMIT n) RETURNING, lease 30 s
#          delete   DELETE by primary key
#        the floor (b), the primitive limit: INSERT, UPDATE by primary key,
#          DELETE by primary key, combined as 1 / (1/ins + 1/upd + 1/del)
#        the extension: send / send_batch, receive, delete / delete_batch
#     b. the full cycle send -> receive -> delete, three autocommit
#        statements, at CLIENTS x BATCHES: floor (a) pk and idx, and the
#        standard queue; its line also gives the ratio to floor (b)
#     c. the full cycle at FIFO_SHAPES: FIFO queues with FIFO_GROUPS groups
#        (each send to a random group, with a unique deduplication id), and
#        the standard queue with a unique deduplication id on every send
#  2. long polling: commit-to-return latency of waiting receives, 50
#     receivers on 50 queues and 10 receivers on 1 queue (median, p99)
#  3. scale: the receive's latency (pgbench -r) in a full cycle at 1 client,
#     synchronous_commit off, with 1,000 messages waiting, 1,000,000
#     waiting, and 1,000 waiting behind 100,000 in flight (lower ids, leased
#     for an hour); floor (a) is the faster variant per case; and a FIFO
#     queue's receive with 1,000 and 1,000,000 waiting over 100 groups
#  5. topics (test/bench/topics.sh; TOPICS=0 skips them): publish to one
#     queue against send, a 10 KB body to 10 queues against one send, and
#     a publish to 1,000 filtered subscriptions against one
#  6. consumers (test/bench/consumers.sh; CONSUMERS=0 skips them): push
#     latency from commit to handler (median, p99), and a consumer draining
#     100,000 messages against the standard full cycle of its shape
#  7. many queues (test/bench/many.sh; MANYQ=0 skips it): MANYQ_QUEUES
#     queues (10,000; 1,000 with QUICK=1) in a database of their own:
#     queue.create and queue.drop per second against CREATE/DROP TABLE of a
#     hand-written queue, relations and KB per empty queue, the worker's and
#     launcher's CPU with all of them idle (MANYQ_IDLE_SECS), one backend's
#     memory after touching min(N, 1000) of them (queue.plan_cache_queues 0
#     and 100), and the full cycle spread over min(N, 1000) queues against
#     one queue
#  8. the SQS endpoint (test/bench/sqs.sh; SQS=0 skips it): the full
#     cycle over HTTP against SQL at batch 10 and 1, long-poll wake-up over
#     HTTP, memory of SQS_PARK parked long polls
#  9. fair queues (test/bench/fair.sh; FAIR=0 skips it): the cycle with
#     1,000 tenants against none, the quiet tenants' dwell beside a noisy
#     backlog, and the most in flight seen under max_in_flight_per_group
# 10. Citus (test/bench/citus.sh; CITUS=0 skips it, as does a PostgreSQL
#     without Citus): the full cycle through a coordinator, through the
#     queue's own worker, and on this plain node, in the same run
# 11. a held snapshot (test/bench/bloat.sh; BLOAT=0 skips it, and QUICK=1
#     does): BLOAT_RATE sends/s and BLOAT_CONSUMERS consumers for a clean
#     phase, one with a REPEATABLE READ transaction held open, and one after,
#     on the floor (idx), the extension's standard and FIFO queues in both
#     layouts, and PGMQ where installed: consumed/s, receive p50 and p99,
#     dead tuples, size, index entries per receive, heap blocks and WAL per
#     message, per phase
# 12. rate limits (test/bench/rate.sh; RATE=0 skips it): the cycle with a
#     queue-wide and a per-tenant limit that never binds, against none
#  4. (not with QUICK=1) the soak: SOAK_MESSAGES messages through a queue
#     kept near empty (send 10 -> receive 10 -> delete, 4 clients, autovacuum
#     at its defaults), for the extension and the floor (idx): throughput per
#     5 s window (pgbench -P 5) and table + index size at the end
#
# Every figure is the median of RUNS runs (the soak runs once).  Each run of
# a throughput figure starts from a freshly made queue or table holding
# PREFILL visible messages; runs of the kinds compared alternate their order.
# After a run the counters (the extension) or the table (the floor) must show
# that every message was handled as the script says (WARN lines otherwise).
# Results are lines
#   BENCH <name> <value> <unit> <ratio> [vs_b=<r>] [vs_std=<r>]
# where <ratio> is value / the same figure of floor (a) in the same shape
# (1.00 on floor (a) itself, "-" where there is none): above 1 is better for
# msgs/s, below 1 is better for ms and MB.  Names end in _on or _off, the
# synchronous_commit of the run.  Last come a summary table and the issue's
# targets, marked ok or MISS.  Nothing is asserted: figures are printed.
#
# Environment (all optional; defaults for the full run, then QUICK=1):
#   QUICK=1            smoke reading in about two minutes (one of them many
#                      queues, 1,000 of them): 1 run of 2 s, c8,
#                      batches 1 and 10, sync on, no scale test, no soak
#   RUNS, SECS         runs per figure (3; 1) and seconds per run (3; 2)
#   SYNC_COMMITS       synchronous_commit settings ("on off"; "on")
#   CLIENTS, BATCHES   full cycle shapes ("1 4 8", "1 10 100"; "8", "1 10")
#   OP_CLIENTS, OP_BATCHES  single-operation shapes ("8", "1 10 100"; "8", "10")
#   CLIENTS_<sync>, OP_BATCHES_<sync>  the same under that synchronous_commit
#                      setting; to keep the full run near 25 minutes the
#                      defaults are CLIENTS_off="1 8" and OP_BATCHES_off="1 10"
#                      (unless CLIENTS or OP_BATCHES is given)
#   OPS                which single operations ("insert receive delete update")
#   FLOOR_ALL=1        also measure insert and delete on the idx variant
#                      (an extra index only adds work to them)
#   OP_MAX_MSGS        cap on the messages a receive/delete run takes (300000)
#   FIFO_SHAPES        clients x batch of the FIFO/dedup cycles ("c8_b1 c8_b10"; "c8_b10")
#   FIFO_GROUPS        FIFO group counts ("1 100 10000"; "100")
#   FIFO_SYNCS         synchronous_commit settings of those (the first of
#                      SYNC_COMMITS)
#   LP_ROUNDS          long-poll wake-ups per run (1000; 300); LP=0 skips it
#   SCALE=0/1          the scale test (1; 0); SCALE_MESSAGES (1000000),
#                      SCALE_INFLIGHT (100000), SCALE_BATCH (10), SCALE_SYNC
#                      SCALE_FIFO_GROUPS (100: the FIFO case's groups),
#                      (off: the latency is the receive's work, not the
#                      wait for the WAL flush, which varies more than it)
#   SOAK=0/1           the soak (1; 0); SOAK_MESSAGES (1000000), SOAK_SYNC (on)
#   MANYQ=0/1          the many-queues section (1); MANYQ_QUEUES (100000;
#                      1000), MANYQ_TOUCH (min(MANYQ_QUEUES, 10000; 1000): queues of
#                      the memory and cycle parts), MANYQ_IDLE_SECS (30; 10),
#                      MANYQ_SECS (SECS), MANYQ_CLIENTS (4), MANYQ_SYNC (off),
#                      MANYQ_PREFILL (100 messages per queue in the cycle)
#   PREFILL            messages waiting at the start of each run (1000)
#   BODY_BYTES         message body size (100)
#   BENCH_LAYOUT       the queues' layout: each kind's (empty: shared, and
#                      dedicated for the *_ded kinds), dedicated (every
#                      queue), or old (no layout argument: a build before
#                      1.4, with STORAGE_PAIRS=0; see docs/commands.md, make bench)
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
	SECS=${SECS:-2}
	SYNC_COMMITS=${SYNC_COMMITS:-on}
	CLIENTS=${CLIENTS:-8}
	BATCHES=${BATCHES:-"1 10"}
	OP_CLIENTS=${OP_CLIENTS:-8}
	OP_BATCHES=${OP_BATCHES:-10}
	FIFO_SHAPES=${FIFO_SHAPES:-c8_b10}
	FIFO_GROUPS=${FIFO_GROUPS:-100}
	LP_ROUNDS=${LP_ROUNDS:-300}
	SCALE=${SCALE:-0}
	SOAK=${SOAK:-0}
else
	RUNS=${RUNS:-3}
	SECS=${SECS:-3}
	SYNC_COMMITS=${SYNC_COMMITS:-"on off"}
	if [ -z "${CLIENTS:-}" ]; then
		CLIENTS="1 4 8"
		CLIENTS_off=${CLIENTS_off:-"1 8"}
	fi
	BATCHES=${BATCHES:-"1 10 100"}
	OP_CLIENTS=${OP_CLIENTS:-8}
	if [ -z "${OP_BATCHES:-}" ]; then
		OP_BATCHES="1 10 100"
		OP_BATCHES_off=${OP_BATCHES_off:-"1 10"}
	fi
	FIFO_SHAPES=${FIFO_SHAPES:-"c8_b1 c8_b10"}
	FIFO_GROUPS=${FIFO_GROUPS:-"1 100 10000"}
	LP_ROUNDS=${LP_ROUNDS:-1000}
	SCALE=${SCALE:-1}
	SOAK=${SOAK:-1}
fi
OPS=${OPS:-"insert receive delete update"}
FIFO_SYNCS=${FIFO_SYNCS:-${SYNC_COMMITS%% *}}
FLOOR_ALL=${FLOOR_ALL:-0}
OP_MAX_MSGS=${OP_MAX_MSGS:-300000}
LP=${LP:-1}
SCALE_MESSAGES=${SCALE_MESSAGES:-1000000}
SCALE_FIFO_GROUPS=${SCALE_FIFO_GROUPS:-100}
SCALE_INFLIGHT=${SCALE_INFLIGHT:-100000}
SCALE_BATCH=${SCALE_BATCH:-10}
SCALE_SYNC=${SCALE_SYNC:-off}
SOAK_MESSAGES=${SOAK_MESSAGES:-1000000}
SOAK_SYNC=${SOAK_SYNC:-on}
PREFILL=${PREFILL:-1000}
BODY_BYTES=${BODY_BYTES:-100}
BENCH_FLOOR_ONLY=${BENCH_FLOOR_ONLY:-0}
BENCH_KEEP=${BENCH_KEEP:-0}
QUEUE=bench
FIFO_QUEUE=bench-fifo
BODY=$(head -c "$BODY_BYTES" /dev/zero | tr '\0' 'x')
T_START=$(date +%s)
el() { echo "[t+$(( $(date +%s) - T_START ))s]"; }

# shellcheck source=lib.sh
. "$HERE/lib.sh"

start_cluster
psql_init
make_scripts

# --- machine and settings ----------------------------------------------------

echo "== machine $(el)"
echo "cores:      $(nproc)"
echo "cpu:        $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
echo "memory:     $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "kernel:     $(uname -sr)"
echo "load:       $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min, at the start)"
echo "server:     $(psql_val 'SELECT version()')"
echo "pgbench:    $("$BINDIR/pgbench" --version)"
echo "source:     $(git -C "$HERE" describe --always --dirty 2>/dev/null || echo unknown)"
echo "date:       $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "== settings $(el)"
"${PSQL[@]}" -At -F ' = ' -c "
	SELECT name, current_setting(name) FROM pg_settings
	 WHERE name IN ('shared_buffers', 'max_connections', 'synchronous_commit', 'fsync',
	                'wal_level', 'max_wal_size', 'checkpoint_timeout', 'autovacuum',
	                'autovacuum_naptime', 'autovacuum_vacuum_scale_factor',
	                'autovacuum_vacuum_threshold', 'autovacuum_vacuum_cost_limit',
	                'shared_preload_libraries', 'jit')
	 ORDER BY name"
echo "runs:       median of $RUNS x ${SECS}s per figure (receive/delete alone: a fixed count per run, about ${SECS}s)"
echo "sync:       synchronous_commit per run: $SYNC_COMMITS"
echo "cycle:      clients $CLIENTS x batches $BATCHES"
echo "ops:        $OPS at clients $OP_CLIENTS x batches $OP_BATCHES"
echo "fifo/dedup: $FIFO_SHAPES, groups $FIFO_GROUPS"
echo "queues:     $PREFILL messages waiting at the start of each run; body $BODY_BYTES bytes"
echo "pgbench:    pgbench -n -M prepared -c <clients> -j <clients> -f test/bench/<script>.sql"

EXT=1
if [ "$BENCH_FLOOR_ONLY" = 1 ]; then
	EXT=0
	echo "SKIP extension: BENCH_FLOOR_ONLY=1, measuring the floor only"
else
	"${PSQL[@]}" -c 'CREATE EXTENSION queue' 2>"$BENCH_DIR/ext.err" ||
		die "CREATE EXTENSION queue: $(cat "$BENCH_DIR/ext.err") (set BENCH_FLOOR_ONLY=1 to measure the floor alone)"
	echo "extension:  queue $(psql_val "SELECT extversion FROM pg_extension WHERE extname = 'queue'")"
fi

# --- one run of each kind ------------------------------------------------------
#
# Each *_one function makes a fresh queue, runs pgbench once, checks the
# outcome and sets M (msgs/s; for lat_one, ms).

# cycle_one KIND C B SYNC [GROUPS]; KIND floor_pk, floor_idx, std, std_dedup,
# fifo.
cycle_one() {
	local kind=$1 c=$2 b=$3 sync=$4 groups=${5:-1} q=$QUEUE before got s r d
	# <kind>_ded: the same on a dedicated queue (DESIGN.md "Storage");
	# the others are shared
	BENCH_DEDICATED=false
	case $kind in *_ded) BENCH_DEDICATED=true; kind=${kind%_ded} ;; esac
	case $kind in
	floor_*)
		reset_floor "${kind#floor_}" "$PREFILL"
		pgb "$(script "$kind" cycle "$b")" "$c" "$sync" "-T $SECS" -D batch="$b"
		M=$(awk -v t="$TPS" -v b="$b" 'BEGIN { print t * b }')
		check "cycle $kind c$c b$b $sync: visible/in-flight/sent" "$(psql_val "
			SELECT count(*) FILTER (WHERE visible_at <= now()) || ' ' ||
			       count(*) FILTER (WHERE visible_at > now()) || ' ' ||
			       (SELECT last_value - $PREFILL FROM bench_floor_id_seq)
			  FROM bench_floor")" "$PREFILL 0 $((TX * b))"
		;;
	std | std_dedup)
		reset_queue "$q" false 1 "$PREFILL"
		pgb "$(script "$kind" cycle "$b")" "$c" "$sync" "-T $SECS" -D batch="$b"
		M=$(awk -v t="$TPS" -v b="$b" 'BEGIN { print t * b }')
		check "cycle $kind c$c b$b $sync: sent/received/deleted" "$(counters "$q")" \
			"$((PREFILL + TX * b)) $((TX * b)) $((TX * b))"
		;;
	fifo)
		q=$FIFO_QUEUE
		reset_queue "$q" true "$groups" "$PREFILL"
		pgb "$(script fifo cycle "$b")" "$c" "$sync" "-T $SECS" -D batch="$b" -D groups="$groups" -D queue="$q"
		got=$(counters "$q")
		# msgs/s: the messages deleted (receives can come back short)
		M=$(awk -v d="${got##* }" -v s="$DUR" 'BEGIN { print (s > 0 ? d / s : 0) }')
		read -r s r d <<<"$got"
		check "cycle fifo g$groups c$c b$b $sync: sent, received - deleted" "$s $((r - d))" \
			"$((PREFILL + TX * b)) 0"
		;;
	esac
}

# op_one KIND OP C B SYNC N: OP insert, receive, delete, update; KIND
# floor_pk, floor_idx, std.  receive and delete take N messages (pgbench -t).
op_one() {
	local kind=$1 op=$2 c=$3 b=$4 sync=$5 n=$6 per got
	local t=$(( (n + c * b - 1) / (c * b) ))
	n=$((t * c * b))
	per=$((t * b))
	case $op/$kind in
	insert/floor_*)
		reset_floor "${kind#floor_}" "$PREFILL"
		pgb "$(script "$kind" insert "$b")" "$c" "$sync" "-T $SECS" -D batch="$b"
		check "insert $kind c$c b$b $sync: rows" "$(psql_val "SELECT count(*) FROM bench_floor")" "$((PREFILL + TX * b))"
		;;
	insert/std)
		reset_queue "$QUEUE" false 1 "$PREFILL"
		pgb "$(script std send "$b")" "$c" "$sync" "-T $SECS" -D batch="$b"
		check "send std c$c b$b $sync: sent" "$(counters "$QUEUE" | cut -d' ' -f1)" "$((PREFILL + TX * b))"
		;;
	update/floor_pk)
		reset_floor pk $((c * 1000))
		pgb "$(script floor_pk update "$b")" "$c" "$sync" "-T $SECS" -D batch="$b" -D region=1000
		check "update c$c b$b $sync: rows updated" "$(psql_val "SELECT sum(receive_count) FROM bench_floor")" "$((TX * b))"
		;;
	receive/floor_*)
		# -T: the pk variant slows as leased rows pile up at the head of
		# its order, so a fixed count could take minutes.  The queue holds
		# n more than PREFILL: it must not run dry (checked); msgs/s counts
		# the leases.
		reset_floor "${kind#floor_}" $((PREFILL + n))
		pgb "$(script "$kind" receive "$b")" "$c" "$sync" "-T $SECS" -D batch="$b"
		got=$(psql_val "SELECT count(*) FROM bench_floor WHERE visible_at > now()")
		M=$(awk -v g="$got" -v s="$DUR" 'BEGIN { print g / s }')
		[ "$got" -lt $((PREFILL + n)) ] || check "receive $kind c$c b$b $sync: the queue ran dry" yes no
		[ "$got" -le $((TX * b)) ] || check "receive $kind c$c b$b $sync: leased <= receives x batch" "$got" "<= $((TX * b))"
		return
		;;
	receive/std)
		reset_queue "$QUEUE" false 1 $((PREFILL + n))
		pgb "$(script std receive "$b")" "$c" "$sync" "-T $SECS" -D batch="$b"
		got=$(counters "$QUEUE" | cut -d' ' -f2)
		M=$(awk -v g="$got" -v s="$DUR" 'BEGIN { print g / s }')
		[ "$got" -lt $((PREFILL + n)) ] || check "receive std c$c b$b $sync: the queue ran dry" yes no
		[ "$got" -le $((TX * b)) ] || check "receive std c$c b$b $sync: received <= receives x batch" "$got" "<= $((TX * b))"
		return
		;;
	delete/floor_*)
		reset_floor "${kind#floor_}" "$PREFILL" "$n"
		pgb "$(script "$kind" delete "$b")" "$c" "$sync" "-t $t" -D batch="$b" -D per="$per"
		check "delete $kind c$c b$b $sync: rows left" "$(psql_val "SELECT count(*) FROM bench_floor")" "$PREFILL"
		;;
	delete/std)
		reset_queue "$QUEUE" false 1 "$PREFILL" "$n"
		pgb "$(script std delete "$b")" "$c" "$sync" "-t $t" -D batch="$b" -D per="$per"
		check "delete std c$c b$b $sync: deleted" "$(counters "$QUEUE" | cut -d' ' -f3)" "$n"
		;;
	*) die "op_one: no $op for $kind" ;;
	esac
	M=$(awk -v t="$TPS" -v b="$b" 'BEGIN { print t * b }')
}

# --- 1. throughput, per synchronous_commit setting ------------------------------

EXT_KINDS=(); [ "$EXT" = 1 ] && EXT_KINDS=(std)
# STORAGE_PAIRS=1: each full cycle also on a dedicated queue, interleaved
# with the shared one in the same runs (shared/dedicated printed)
STORAGE_PAIRS=${STORAGE_PAIRS:-1}
CYCLE_KINDS=("${EXT_KINDS[@]}"); [ "$EXT" = 1 ] && [ "$STORAGE_PAIRS" = 1 ] && CYCLE_KINDS+=(std_ded)
have_op() { [[ " $OPS " == *" $1 "* ]]; }

for sync in $SYNC_COMMITS; do
	echo "== synchronous_commit = $sync $(el)"

	# a. single operations
	v=OP_BATCHES_$sync
	for c in $OP_CLIENTS; do
		for b in ${!v:-$OP_BATCHES}; do
			sh="c${c}_b${b}_$sync"
			echo "-- single operations, $c clients, batch $b, synchronous_commit $sync (msgs/s) $(el)"
			ins_kinds=(floor_pk); [ "$FLOOR_ALL" = 1 ] && ins_kinds+=(floor_idx)
			send_name=send; [ "$b" -gt 1 ] && send_name=send_batch
			del_name=delete; [ "$b" -gt 1 ] && del_name=delete_batch
			if have_op insert; then
				measure "insert $sh" op_one insert "$c" "$b" "$sync" 0 -- "${ins_kinds[@]}" "${EXT_KINDS[@]}"
				f=${MED[floor_pk]}
				[ "$FLOOR_ALL" = 1 ] && { result "insert_floor_idx_$sh" "${MED[floor_idx]}" msgs/s 0 -; f=$(bigger "$f" "${MED[floor_idx]}"); }
				result "insert_floor_$sh" "$f" msgs/s 0 self
				[ "$EXT" = 1 ] && result "${send_name}_$sh" "${MED[std]}" msgs/s 0 "$f"
			fi
			if have_op update; then
				measure "update $sh" op_one update "$c" "$b" "$sync" 0 -- floor_pk
				result "update_floor_$sh" "${MED[floor_pk]}" msgs/s 0 -
			fi
			# receive and delete need messages waiting: receive (pgbench -T)
			# SECS at the rate of the insert, delete (a fixed count, -t)
			# half as many.  (Both ran at about half the rate of the insert
			# or less on the first machine; a queue that runs dry is
			# reported.)
			n=$(awk -v r="${RES[insert_floor_$sh]:-5000}" -v s="$SECS" -v m="$OP_MAX_MSGS" 'BEGIN {
				n = r * s; if (n > m) n = m; if (n < 2000) n = 2000; printf "%d", n }')
			if have_op receive; then
				measure "receive $sh" op_one receive "$c" "$b" "$sync" "$n" -- floor_pk floor_idx "${EXT_KINDS[@]}"
				result "receive_floor_pk_$sh" "${MED[floor_pk]}" msgs/s 0 -
				result "receive_floor_idx_$sh" "${MED[floor_idx]}" msgs/s 0 -
				f=$(bigger "${MED[floor_pk]}" "${MED[floor_idx]}")
				result "receive_floor_$sh" "$f" msgs/s 0 self
				[ "$EXT" = 1 ] && result "receive_$sh" "${MED[std]}" msgs/s 0 "$f"
			fi
			if have_op delete; then
				del_kinds=(floor_pk); [ "$FLOOR_ALL" = 1 ] && del_kinds+=(floor_idx)
				measure "delete $sh" op_one delete "$c" "$b" "$sync" $((n / 2)) -- "${del_kinds[@]}" "${EXT_KINDS[@]}"
				f=${MED[floor_pk]}
				[ "$FLOOR_ALL" = 1 ] && { result "delete_floor_idx_$sh" "${MED[floor_idx]}" msgs/s 0 -; f=$(bigger "$f" "${MED[floor_idx]}"); }
				result "delete_floor_$sh" "$f" msgs/s 0 self
				[ "$EXT" = 1 ] && result "${del_name}_$sh" "${MED[std]}" msgs/s 0 "$f"
			fi
			if [ -n "${RES[insert_floor_$sh]:-}" ] && [ -n "${RES[update_floor_$sh]:-}" ] && [ -n "${RES[delete_floor_$sh]:-}" ]; then
				result "floor_b_$sh" "$(awk -v i="${RES[insert_floor_$sh]}" -v u="${RES[update_floor_$sh]}" \
					-v d="${RES[delete_floor_$sh]}" 'BEGIN { print 1 / (1 / i + 1 / u + 1 / d) }')" msgs/s 0 - \
					"(1/(1/insert + 1/update + 1/delete): the primitive limit)"
			fi
		done
	done

	# b. the full cycle
	v=CLIENTS_$sync
	for c in ${!v:-$CLIENTS}; do
		for b in $BATCHES; do
			sh="c${c}_b${b}_$sync"
			echo "-- full cycle, $c clients, batch $b, synchronous_commit $sync (msgs/s = cycles/s x batch) $(el)"
			measure "cycle $sh" cycle_one "$c" "$b" "$sync" -- floor_pk floor_idx "${CYCLE_KINDS[@]}"
			result "cycle_floor_pk_$sh" "${MED[floor_pk]}" msgs/s 0 -
			result "cycle_floor_idx_$sh" "${MED[floor_idx]}" msgs/s 0 -
			f=$(bigger "${MED[floor_pk]}" "${MED[floor_idx]}")
			result "cycle_floor_$sh" "$f" msgs/s 0 self
			if [ "$EXT" = 1 ]; then
				vb=""
				[ -n "${RES[floor_b_$sh]:-}" ] && vb="vs_b=$(ratio "${MED[std]}" "${RES[floor_b_$sh]}")"
				result "cycle_std_$sh" "${MED[std]}" msgs/s 0 "$f" $vb
				[ "$STORAGE_PAIRS" = 1 ] && result "cycle_std_dedicated_$sh" "${MED[std_ded]}" msgs/s 0 "$f" \
					"shared/dedicated=$(ratio "${MED[std]}" "${MED[std_ded]}")"
			fi
		done
	done

	# c. FIFO and deduplication ids, full cycle
	[ "$EXT" = 1 ] && [[ " $FIFO_SYNCS " == *" $sync "* ]] || continue
	for fs in $FIFO_SHAPES; do
		c=${fs%%_*}; c=${c#c}; b=${fs##*_b}
		sh="c${c}_b${b}_$sync"
		echo "-- FIFO and deduplication ids, full cycle, $c clients, batch $b, synchronous_commit $sync (msgs/s) $(el)"
		# "std" among the kinds: the standard queue again, in the same
		# interleaved runs as the FIFO queues, so the ratios do not ride on
		# the disk's drift between two measurements (fsync times here vary
		# by half within minutes).
		fifo_g() {
			case $1 in
			std) cycle_one std "$2" "$3" "$4" ;;
			*_ded) cycle_one fifo_ded "$2" "$3" "$4" "${1%_ded}" ;;
			*) cycle_one fifo "$2" "$3" "$4" "$1" ;;
			esac
		}
		ded_groups=""
		[ "$STORAGE_PAIRS" = 1 ] && for g in $FIFO_GROUPS; do ded_groups+=" ${g}_ded"; done
		# the floor and the standard queue of this shape, if not measured above
		if [ -z "${RES[cycle_std_$sh]:-}" ]; then
			measure "cycle $sh" cycle_one "$c" "$b" "$sync" -- floor_pk floor_idx std
			f=$(bigger "${MED[floor_pk]}" "${MED[floor_idx]}")
			result "cycle_floor_$sh" "$f" msgs/s 0 self
			result "cycle_std_$sh" "${MED[std]}" msgs/s 0 "$f"
		fi
		f=${RES[cycle_floor_$sh]}
		s=${RES[cycle_std_$sh]}
		measure "dedup $sh" cycle_one "$c" "$b" "$sync" -- std_dedup
		result "cycle_std_dedup_$sh" "${MED[std_dedup]}" msgs/s 0 "$f" "vs_std=$(ratio "${MED[std_dedup]}" "$s")"
		measure "fifo $sh" fifo_g "$c" "$b" "$sync" -- std $FIFO_GROUPS $ded_groups
		s=${MED[std]}
		result "cycle_std_with_fifo_$sh" "$s" msgs/s 0 "$f"
		for g in $FIFO_GROUPS; do
			result "cycle_fifo_g${g}_$sh" "${MED[$g]}" msgs/s 0 "$f" "vs_std=$(ratio "${MED[$g]}" "$s")"
			[ "$STORAGE_PAIRS" = 1 ] && result "cycle_fifo_dedicated_g${g}_$sh" "${MED[${g}_ded]}" msgs/s 0 "$f" \
				"shared/dedicated=$(ratio "${MED[$g]}" "${MED[${g}_ded]}")"
		done
	done
done

# --- 2. long polling -----------------------------------------------------------

if [ "$EXT" = 1 ] && [ "$LP" = 1 ]; then
	echo "== long polling: commit-to-return latency, $LP_ROUNDS wake-ups per run (test/bench/longpoll.c) $(el)"
	if ! cc -O2 -I"$("$PG_CONFIG" --includedir)" -o "$BENCH_DIR/longpoll" "$HERE/longpoll.c" \
		-L"$("$PG_CONFIG" --libdir)" -lpq 2>"$BENCH_DIR/longpoll.err"; then
		cat "$BENCH_DIR/longpoll.err"
		echo "SKIP longpoll: does not build (needs a C compiler and libpq's headers)"
	else
		for cfg in "50 50 50q" "10 1 1q"; do
			read -r nr nq tag <<<"$cfg"
			meds="" p99s=""
			for r in $(seq 1 "$RUNS"); do
				if out=$("$BENCH_DIR/longpoll" "host=$BENCH_DIR port=$PORT user=postgres dbname=postgres" \
					"$nr" "$nq" "$LP_ROUNDS" 2>&1); then :; else
					echo "WARN longpoll $tag: exit status $? (a message redelivered or left over?)"
					CHECKS_FAILED=$((CHECKS_FAILED + 1))
				fi
				echo "  run $r/$RUNS longpoll $tag: $out"
				meds+=" $(sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p' <<<"$out")"
				p99s+=" $(sed -n 's/.*p99_ms=\([0-9.]*\).*/\1/p' <<<"$out")"
			done
			result "longpoll_${tag}_median" "$(median <<<"$meds")" ms 3 -
			result "longpoll_${tag}_p99" "$(median <<<"$p99s")" ms 3 -
		done
	fi
fi

# --- 3. scale: receive latency against queue size and leases ahead --------------

# lat_one KIND: one run of the full cycle at 1 client with pgbench -r on the
# queue as it is; M = the receive's mean latency in ms.
lat_one() {
	local kind=$1 s
	s=$(script "$kind" cycle "$SCALE_BATCH")
	[[ $kind == floor_* ]] || s=$(script std cycle "$SCALE_BATCH")
	pgb "$s" 1 "$SCALE_SYNC" "-T $SECS" -r -D batch="$SCALE_BATCH"
	M=$(stmt_latency 2)
}
# scale_case KIND CASE: make the queue of CASE (1k, 1m, inflight), measure.
scale_case() {
	local kind=$1 case=$2 leased=0 r got=""
	case $case in
	1m) ;;	# added to the 1k queue by the caller
	inflight) leased=$SCALE_INFLIGHT ;;
	esac
	if [ "$case" != 1m ]; then
		if [[ $kind == floor_* ]]; then reset_floor "${kind#floor_}" "$PREFILL" "$leased"
		else reset_queue "$QUEUE" false 1 "$PREFILL" "$leased"; fi
	else
		if [[ $kind == floor_* ]]; then
			psql_run <<EOF
INSERT INTO bench_floor (visible_at, body) SELECT now(), :'body' FROM generate_series(1, $SCALE_MESSAGES - $PREFILL);
VACUUM ANALYZE bench_floor;
CHECKPOINT;
EOF
		else add_visible "$QUEUE" $((SCALE_MESSAGES - PREFILL)); fi
	fi
	for r in $(seq 1 "$RUNS"); do
		lat_one "$kind"
		got+=" $M"
	done
	echo "  $kind $case: receive ms per run:$got"
	SC[${kind}_$case]=$(median <<<"$got")
}

if [ "$SCALE" = 1 ]; then
	echo "== scale: receive latency (ms, pgbench -r) in the full cycle, 1 client, batch $SCALE_BATCH, synchronous_commit $SCALE_SYNC $(el)"
	echo "   1k: $PREFILL waiting; 1m: $SCALE_MESSAGES waiting; inflight: $PREFILL waiting behind $SCALE_INFLIGHT in flight"
	declare -A SC
	kinds=(floor_pk floor_idx "${EXT_KINDS[@]}")
	for k in "${kinds[@]}"; do
		scale_case "$k" 1k
		scale_case "$k" 1m
		scale_case "$k" inflight
	done
	# floor (a) is the faster variant per case
	for case in 1k 1m inflight; do
		a=${SC[floor_pk_$case]} b=${SC[floor_idx_$case]}
		SC[floor_$case]=$(awk -v a="$a" -v b="$b" 'BEGIN { print (a + 0 <= b + 0 ? a : b) }')
	done
	for case in 1k 1m inflight; do
		result "receive_ms_floor_$case" "${SC[floor_$case]}" ms 3 self "(pk ${SC[floor_pk_$case]}, idx ${SC[floor_idx_$case]})"
		[ "$EXT" = 1 ] && result "receive_ms_std_$case" "${SC[std_$case]}" ms 3 "${SC[floor_$case]}"
	done
	# FIFO: the same receive latency, 1k and 1m waiting, over
	# SCALE_FIFO_GROUPS groups (a receive must not slow with the backlog
	# behind the group heads).  Two queues, one per case, measured in
	# turns (as the FIFO cycles are against the standard queue), so a
	# drift of the machine's speed does not land on one case; each run
	# sends with deduplication ids of its own (a run reusing the last
	# run's ids would enqueue nothing and drain the 1k queue).
	if [ "$EXT" = 1 ]; then
		declare -A FQ=([1k]="$FIFO_QUEUE" [1m]="$FIFO_QUEUE-1m")
		declare -A FGOT=()
		for case in 1k 1m; do
			reset_queue "${FQ[$case]}" true "$SCALE_FIFO_GROUPS" "$PREFILL"
		done
		add_visible_fifo "${FQ[1m]}" $((SCALE_MESSAGES - PREFILL)) "$SCALE_FIFO_GROUPS"
		for r in $(seq 1 "$RUNS"); do
			order="1k 1m"; [ $((r % 2)) = 0 ] && order="1m 1k"
			for case in $order; do
				pgb "$(script fifo cycle "$SCALE_BATCH")" 1 "$SCALE_SYNC" "-T $SECS" -r -D batch="$SCALE_BATCH" \
					-D groups="$SCALE_FIFO_GROUPS" -D queue="${FQ[$case]}" -D i=$((r * 10000000))
				FGOT[$case]+=" $(stmt_latency 3)"
			done
		done
		for case in 1k 1m; do
			echo "  fifo ($SCALE_FIFO_GROUPS groups) $case: receive ms per run:${FGOT[$case]}"
			SC[fifo_$case]=$(median <<<"${FGOT[$case]}")
		done
		psql_run <<<"SELECT queue.drop('${FQ[1m]}')" >/dev/null
		result "receive_ms_fifo_1k" "${SC[fifo_1k]}" ms 3 -
		result "receive_ms_fifo_1m" "${SC[fifo_1m]}" ms 3 -
		result "receive_scale_fifo_1m_vs_1k" "$(ratio "${SC[fifo_1m]}" "${SC[fifo_1k]}")" x 2 -
	fi
	for kind in floor "${EXT_KINDS[@]}"; do
		result "receive_scale_${kind}_1m_vs_1k" "$(ratio "${SC[${kind}_1m]}" "${SC[${kind}_1k]}")" x 2 \
			"$([ "$kind" = floor ] && echo self || echo "${RES[receive_scale_floor_1m_vs_1k]}")"
		result "receive_scale_${kind}_inflight_vs_none" "$(ratio "${SC[${kind}_inflight]}" "${SC[${kind}_1k]}")" x 2 \
			"$([ "$kind" = floor ] && echo self || echo "${RES[receive_scale_floor_inflight_vs_none]}")"
	done
fi

# --- 4. the soak -------------------------------------------------------------------

# soak_one KIND: SOAK_MESSAGES messages, 4 clients, batch 10, pgbench -P 5.
soak_one() {
	local kind=$1 t=$((SOAK_MESSAGES / 40)) s windows size live
	if [ "$kind" = floor ]; then
		reset_floor idx 100
		s=$(script floor_idx cycle 10)
	else
		reset_queue "$QUEUE" false 1 100
		s=$(script std cycle 10)
	fi
	pgb "$s" 4 "$SOAK_SYNC" "-t $t" -P 5 -D batch=10
	windows=$(sed -n 's/^progress: [0-9.]* s, \([0-9.]*\) tps.*/\1/p' <<<"$OUT" | awk '{ printf " %.0f", $1 * 10 }')
	if [ "$kind" = floor ]; then
		size=$(psql_val "SELECT pg_total_relation_size('bench_floor')")
		live=$(psql_val "SELECT count(*) FROM bench_floor")
	else
		size=$(queue_size "$QUEUE")
		live=$(psql_val "SELECT count(*) FROM queue_data.q$QID")
	fi
	echo "  soak $kind: $((t * 40)) messages in $(fmt "$DUR" 1) s; msgs/s per 5 s window:$windows"
	echo "  soak $kind: at the end $live rows, $(fmt "$(awk -v s="$size" 'BEGIN { print s / 1048576 }')" 1) MB (table + indexes)"
	SOAK_RATE[$kind]=$(awk -v t="$TPS" 'BEGIN { print t * 10 }')
	SOAK_WIN[$kind]=$(awk '{ mn = $1; mx = $1; for (i = 2; i <= NF; i++) { if ($i < mn) mn = $i; if ($i > mx) mx = $i }
		if (NF < 2 || mx == 0) print "-"; else print mn / mx }' <<<"$windows")
	SOAK_MB[$kind]=$(awk -v s="$size" 'BEGIN { print s / 1048576 }')
}

if [ "$SOAK" = 1 ]; then
	echo "== soak: $SOAK_MESSAGES messages, send 10 -> receive 10 -> delete, 4 clients, synchronous_commit $SOAK_SYNC, autovacuum at its defaults $(el)"
	declare -A SOAK_RATE SOAK_WIN SOAK_MB
	soak_one floor
	[ "$EXT" = 1 ] && soak_one std
	result soak_floor_rate "${SOAK_RATE[floor]}" msgs/s 0 self
	result soak_floor_window_ratio "${SOAK_WIN[floor]}" x 2 self "(slowest / fastest 5 s window)"
	result soak_floor_size "${SOAK_MB[floor]}" MB 1 self
	if [ "$EXT" = 1 ]; then
		result soak_std_rate "${SOAK_RATE[std]}" msgs/s 0 "${SOAK_RATE[floor]}"
		result soak_std_window_ratio "${SOAK_WIN[std]}" x 2 "${SOAK_WIN[floor]}" "(slowest / fastest 5 s window)"
		result soak_std_size "${SOAK_MB[std]}" MB 1 "${SOAK_MB[floor]}"
	fi
fi

# --- 5. topics ------------------------------------------------------------------------

if [ "$EXT" = 1 ] && [ "${TOPICS:-1}" = 1 ]; then
	# shellcheck source=topics.sh
	. "$HERE/topics.sh"
fi

# --- 6. consumers ---------------------------------------------------------------------

if [ "$EXT" = 1 ] && [ "${CONSUMERS:-1}" = 1 ]; then
	# shellcheck source=consumers.sh
	. "$HERE/consumers.sh"
fi

# --- 7. many queues ------------------------------------------------------------------

if [ "$EXT" = 1 ] && [ "${MANYQ:-1}" = 1 ]; then
	# shellcheck source=many.sh
	. "$HERE/many.sh"
fi

# --- 8. the SQS endpoint -----------------------------------------------------------

if [ "$EXT" = 1 ] && [ "${SQS:-1}" = 1 ]; then
	# shellcheck source=sqs.sh
	. "$HERE/sqs.sh"
fi

# --- 9. fair queues ------------------------------------------------------------------

if [ "$EXT" = 1 ] && [ "${FAIR:-1}" = 1 ]; then
	# shellcheck source=fair.sh
	. "$HERE/fair.sh"
fi

# --- 10. Citus ------------------------------------------------------------------------

if [ "$EXT" = 1 ] && [ "${CITUS:-1}" = 1 ]; then
	# shellcheck source=citus.sh
	. "$HERE/citus.sh"
fi

# --- 11. a held snapshot --------------------------------------------------------------

if [ "$EXT" = 1 ] && [ "${BLOAT:-1}" = 1 ] && [ "$QUICK" != 1 ]; then
	# shellcheck source=bloat.sh
	. "$HERE/bloat.sh"
fi

# --- 12. rate limits -------------------------------------------------------------------

if [ "$EXT" = 1 ] && [ "${RATE:-1}" = 1 ]; then
	# shellcheck source=rate.sh
	. "$HERE/rate.sh"
fi

# --- summary -------------------------------------------------------------------------

. "$HERE/summary.sh"
# shellcheck source=chart.sh
. "$HERE/chart.sh"
echo "== done in $(( $(date +%s) - T_START )) s"
