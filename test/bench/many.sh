# shellcheck shell=bash
# test/bench/many.sh - section 7 of run.sh (sourced): many queues (#15).
#
# MANYQ_QUEUES queues (100,000; 1,000 with QUICK=1) in a database of their
# own (manyq), against the same count of hand-written queues in another
# (manyq_floor), so neither counts or slows the other's catalog:
#
#  a. create: queue.create('m<i>') for i = 1..N, one statement each (one
#     psql session), queues/s; beside it two floors: N one-row INSERTs,
#     one statement (and commit) each, into a table with a primary key and
#     a unique name (what a create that inserts rows can reach, bound by
#     the commit's flush with synchronous_commit on), and a plain table
#     shaped like floor (a)'s idx variant (bigserial primary key, body,
#     visible_at, receive_count, an index on (visible_at, id)), its CREATE
#     TABLE and CREATE INDEX sent as one query string (one transaction, as
#     a dedicated create is) per table, for at most 10,000 tables
#     (MANYQ_FLOOR_TABLES)
#  b. relations and disk per empty queue: pg_class rows added, the
#     queue's own files (pg_total_relation_size of its tables, with their
#     indexes and TOAST) and the database's growth (pg_database_size, which
#     also counts the catalog rows), each divided by N; and, on a comment
#     line, the relations one queue makes (a probe queue m0, created and
#     dropped first: pg_class rows with an oid above the largest before it)
#  c. (after a and b, before any queue is used) the database's queue worker
#     and the launcher, with all N queues idle: CPU (user + system,
#     /proc/<pid>/stat) over MANYQ_IDLE_SECS (30; 10 with QUICK=1), in % of
#     one core.  The worker neither logs nor exposes the time of a pass, so
#     none is printed.
#  d. backend memory after touching MANYQ_TOUCH queues (min(N, 10,000)): one psql session does
#     send, receive and delete on each of m1..m<MANYQ_TOUCH>, each its own
#     statement, then sums its pg_backend_memory_contexts: all of it, the
#     CachedPlan* contexts (CachedPlan, CachedPlanSource, CachedPlanQuery)
#     and CacheMemoryContext with everything under it; once with
#     queue.plan_cache_queues = 0 (the default: every queue's plans kept)
#     and once with 100 (SET in the session); beside them a session that
#     touched one queue
#  e. the full cycle (send -> receive -> delete, test/bench/many_cycle_b1.sql,
#     MANYQ_CLIENTS (4) clients, synchronous_commit off (MANYQ_SYNC),
#     -M prepared, MANYQ_SECS (SECS) s, median of RUNS) on a random queue
#     among MANYQ_TOUCH, against the same script on
#     one queue (m1), and the spread again with queue.plan_cache_queues =
#     100 (PGOPTIONS); each of the MANYQ_TOUCH queues holds MANYQ_PREFILL
#     (100) visible messages at the start, so a receive always
#     finds one.  Each client's backend plans its statements for a queue
#     the first time it uses it (the first second of a spread run is mostly
#     that), so the line also gives the last second of the run (pgbench -P
#     1, median over the runs): the rate once every queue has been seen.
#  g. (after e) a noisy neighbour: the cycle on one queue alone and while
#     a neighbour queue churns a backlog of 1,000,000 messages, the
#     neighbour shared or dedicated (see below; MANYQ_NOISY=0 skips it)
#  f. drop: queue.drop('m<i>') for all N, one statement each, drops/s (one
#     statement dropping them all runs out of lock slots); beside it DROP
#     TABLE of the floor's N tables, one statement each
#
# Creates, relations, disk, worker CPU and drops are measured once (one run
# of N); memory and the cycle use the first MANYQ_TOUCH queues.  At 10,000
# queues the section took about 6 minutes on 2 cores in 1.3.  Since 1.4
# it runs 100,000 shared queues by default (issue 25's scale): creating
# them takes about 65 s, dropping them about 230 s, the floor's 10,000
# tables 70 s, the noisy neighbour's fill and runs 4 minutes, the whole
# section about 15 minutes (RUNS=3 SECS=20: the issue's figures); 1,000
# queues (QUICK=1) take about 1 minute.  The memory and cycle parts use
# 10,000 queues (MANYQ_TOUCH; 1,000 with QUICK=1).
# MANYQ=0 skips the section.  Printed, never asserted.

if [ "$QUICK" = 1 ]; then
	MANYQ_QUEUES=${MANYQ_QUEUES:-1000}
	MANYQ_IDLE_SECS=${MANYQ_IDLE_SECS:-10}
else
	MANYQ_QUEUES=${MANYQ_QUEUES:-100000}
	MANYQ_IDLE_SECS=${MANYQ_IDLE_SECS:-30}
fi
# the issue's 10,000 (1,000 with QUICK=1)
MANYQ_TOUCH_MAX=1000
[ "$QUICK" = 1 ] || MANYQ_TOUCH_MAX=10000
MANYQ_TOUCH=${MANYQ_TOUCH:-$((MANYQ_QUEUES < MANYQ_TOUCH_MAX ? MANYQ_QUEUES : MANYQ_TOUCH_MAX))}
MANYQ_CLIENTS=${MANYQ_CLIENTS:-4}
MANYQ_SYNC=${MANYQ_SYNC:-off}
MANYQ_PREFILL=${MANYQ_PREFILL:-100}
MANYQ_SECS=${MANYQ_SECS:-$SECS}
MN=$MANYQ_QUEUES
# the floor's tables: at most 10,000 (100,000 CREATE TABLEs alone would
# take some 15 minutes); its figures are per table and per second
FN=${MANYQ_FLOOR_TABLES:-$((MN < 10000 ? MN : 10000))}
# the layout of the queues (DESIGN.md "Storage"): shared (the default) or
# dedicated, set on the database so every session of the section has it
MANYQ_STORAGE=${MANYQ_STORAGE:-shared}

mpsql() { "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$BENCH_DIR" -p "$PORT" -U postgres -d "$1" "${@:2}"; }
mval() { mpsql "$1" -At -c "$2"; }
now_ns() { date +%s%N; }
# timed DB FILE: runs FILE's statements in tenths, one psql session each;
# sets SECS_TAKEN (all of them) and TENTHS ("first last": statements per
# second in the first and the last tenth, to see whether the rate holds up
# as the catalog grows)
timed() {
	local t0 t1 k lines first="" last="" rate
	rm -f "$2".part*
	split -d -n l/10 "$2" "$2.part"
	SECS_TAKEN=0
	for k in "$2".part*; do
		lines=$(wc -l <"$k")
		t0=$(now_ns)
		mpsql "$1" -f "$k" >/dev/null
		t1=$(now_ns)
		rate=$(awk -v a="$t0" -v b="$t1" -v n="$lines" 'BEGIN { print (b > a ? n * 1e9 / (b - a) : 0) }')
		[ -n "$first" ] || first=$rate
		last=$rate
		SECS_TAKEN=$(awk -v s="$SECS_TAKEN" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", s + (b - a) / 1e9 }')
	done
	TENTHS="$(fmt "$first") $(fmt "$last")"
}
per_s() { awk -v n="$1" -v s="$2" 'BEGIN { print (s > 0 ? n / s : 0) }'; }
# db_stats DB SCHEMA -> "pg_class rows, bytes of SCHEMA's tables (with
# indexes and TOAST), database bytes"
db_stats() {
	mval "$1" "SELECT (SELECT count(*) FROM pg_class) || ' ' ||
	                  (SELECT coalesce(sum(pg_total_relation_size(oid)), 0) FROM pg_class
	                    WHERE relnamespace = '$2'::regnamespace AND relkind = 'r') || ' ' ||
	                  pg_database_size(current_database())"
}
# per_queue BEFORE AFTER [N] -> "relations KB KB_db" per queue (of N, MN)
per_queue() {
	awk -v n="${3:-$MN}" -v b="$1" -v a="$2" 'BEGIN { split(b, x, " "); split(a, y, " ")
		printf "%.2f %.2f %.2f\n", (y[1] - x[1]) / n, (y[2] - x[2]) / n / 1024, (y[3] - x[3]) / n / 1024 }'
}

echo "== many queues: $MN queues (memory and cycle over $MANYQ_TOUCH), idle ${MANYQ_IDLE_SECS}s $(el)"
psql_run <<SQL
SET client_min_messages = warning;
DROP DATABASE IF EXISTS manyq WITH (FORCE);
DROP DATABASE IF EXISTS manyq_floor WITH (FORCE);
CREATE DATABASE manyq;
CREATE DATABASE manyq_floor;
SQL
mpsql manyq -c "SET client_min_messages = warning" -c "CREATE EXTENSION queue" \
	-c "ALTER DATABASE manyq SET queue.default_storage = '$MANYQ_STORAGE'"
echo "# queues: $MANYQ_STORAGE"
# the floor's tables go in a schema of their own, counted as queue_data is
mpsql manyq_floor -c "CREATE SCHEMA floor"
seq 1 "$MN" | awk '{ printf "SELECT queue.create('"'"'m%d'"'"');\n", $1 }' >"$BENCH_DIR/many_create.sql"
seq 1 "$MN" | awk '{ printf "SELECT queue.drop('"'"'m%d'"'"');\n", $1 }' >"$BENCH_DIR/many_drop.sql"
seq 1 "$FN" | awk '{ printf "CREATE TABLE floor.mf%d (id bigserial PRIMARY KEY, visible_at timestamptz NOT NULL DEFAULT now(), body text NOT NULL, receive_count int NOT NULL DEFAULT 0)\\; CREATE INDEX mf%d_visible ON floor.mf%d (visible_at, id);\n", $1, $1, $1 }' \
	>"$BENCH_DIR/many_floor_create.sql"
seq 1 "$FN" | awk '{ printf "DROP TABLE floor.mf%d;\n", $1 }' >"$BENCH_DIR/many_floor_drop.sql"
# the commit floor: what a create that inserts rows can reach at best, one
# row inserted per statement (a transaction each), as many as queues
seq 1 "$MN" | awk '{ printf "INSERT INTO floor.rows VALUES (%d, '"'"'m%d'"'"');\n", $1, $1 }' >"$BENCH_DIR/many_floor_insert.sql"

# b (the list): what one queue makes
top=$(mval manyq "SELECT max(oid) FROM pg_class")
mval manyq "SELECT queue.create('m0')" >/dev/null
echo "# one queue makes: $(mval manyq "SELECT string_agg(c.oid::regclass || ' ' || c.relkind::text, ', ' ORDER BY c.oid)
                                     FROM pg_class c WHERE c.oid > $top")"
mval manyq "SELECT queue.drop('m0')" >/dev/null

# a, b: the floor, then the queues
mpsql manyq_floor -c "CHECKPOINT"
before=$(db_stats manyq_floor floor)
timed manyq_floor "$BENCH_DIR/many_floor_create.sql"
FLOOR_CREATE=$(per_s "$FN" "$SECS_TAKEN")
echo "  floor: $FN tables created in $SECS_TAKEN s (per s, first and last tenth: $TENTHS)"
read -r FLOOR_REL FLOOR_KB FLOOR_DBKB <<<"$(per_queue "$before" "$(db_stats manyq_floor floor)" "$FN")"
timed manyq_floor "$BENCH_DIR/many_floor_drop.sql"
FLOOR_DROP=$(per_s "$FN" "$SECS_TAKEN")
echo "  floor: $FN tables dropped in $SECS_TAKEN s (per s, first and last tenth: $TENTHS)"
mpsql manyq_floor -c "CREATE TABLE floor.rows (id bigint PRIMARY KEY, name text NOT NULL UNIQUE)"
timed manyq_floor "$BENCH_DIR/many_floor_insert.sql"
FLOOR_INSERT=$(per_s "$MN" "$SECS_TAKEN")
echo "  floor: $MN rows inserted, one per statement, in $SECS_TAKEN s (per s, first and last tenth: $TENTHS)"
psql_run <<<"DROP DATABASE manyq_floor WITH (FORCE)"

mpsql manyq -c "CHECKPOINT"
before=$(db_stats manyq queue_data)
timed manyq "$BENCH_DIR/many_create.sql"
echo "  queues: $MN created in $SECS_TAKEN s (per s, first and last tenth: $TENTHS)"
read -r Q_FIRST Q_LAST <<<"$TENTHS"
read -r Q_REL Q_KB Q_DBKB <<<"$(per_queue "$before" "$(db_stats manyq queue_data)")"
result manyq_create "$(per_s "$MN" "$SECS_TAKEN")" queues/s 0 "$FLOOR_INSERT" "(floor: $(fmt "$FLOOR_INSERT") one-row inserts/s, each its commit; $(fmt "$FLOOR_CREATE") tables/s; $MN queues; first tenth $Q_FIRST/s, last tenth $Q_LAST/s)"
result manyq_relations_per_queue "$Q_REL" rels 2 "$FLOOR_REL" "(floor: $FLOOR_REL)"
result manyq_kb_per_queue "$Q_KB" KB 1 "$FLOOR_KB" "(own tables, indexes, TOAST; floor: $FLOOR_KB)"
result manyq_db_kb_per_queue "$Q_DBKB" KB 1 "$FLOOR_DBKB" "(database growth with the catalog rows; floor: $FLOOR_DBKB)"

# c: the worker with every queue idle
sleep 5
worker=$(mval manyq "SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue worker' AND datname = 'manyq'")
launcher=$(mval manyq "SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue launcher'")
if [ -z "$worker" ] || [ -z "$launcher" ]; then
	echo "WARN many queues: no queue worker for manyq (pid '$worker') or no launcher (pid '$launcher')"
	CHECKS_FAILED=$((CHECKS_FAILED + 1))
else
	ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
	w0=$(ticks "$worker"); l0=$(ticks "$launcher")
	sleep "$MANYQ_IDLE_SECS"
	w1=$(ticks "$worker"); l1=$(ticks "$launcher")
	hz=$(getconf CLK_TCK)
	result manyq_idle_worker_cpu "$(awk -v t=$((w1 - w0)) -v hz="$hz" -v s="$MANYQ_IDLE_SECS" 'BEGIN { print t * 100 / hz / s }')" \
		%_of_a_core 2 - "($MN idle queues, ${MANYQ_IDLE_SECS}s, queue.sweep_interval $(mval manyq "SHOW queue.sweep_interval"))"
	result manyq_idle_launcher_cpu "$(awk -v t=$((l1 - l0)) -v hz="$hz" -v s="$MANYQ_IDLE_SECS" 'BEGIN { print t * 100 / hz / s }')" \
		%_of_a_core 2 -
fi

# d: one session's memory after touching the queues
MEMQ="WITH RECURSIVE c AS (SELECT * FROM pg_backend_memory_contexts),
	under(name, level) AS (SELECT name, level FROM c WHERE name = 'CacheMemoryContext'
	                       UNION SELECT c.name, c.level FROM c JOIN under u ON c.parent = u.name AND c.level = u.level + 1)
	SELECT sum(total_bytes),
	       coalesce(sum(total_bytes) FILTER (WHERE name LIKE 'CachedPlan%'), 0),
	       (SELECT sum(total_bytes) FROM c WHERE (name, level) IN (SELECT * FROM under))
	  FROM c"
# mem_touch N PLAN_CACHE_QUEUES -> "total cachedplan cache" in MB
mem_touch() {
	{
		echo "SET queue.plan_cache_queues = $2;"
		seq 1 "$1" | awk '{ printf "SELECT message_id FROM queue.send('"'"'m%d'"'"', '"'"'x'"'"'::text);\nSELECT receipt FROM queue.receive('"'"'m%d'"'"') \\gset\nSELECT queue.delete('"'"'m%d'"'"', :'"'"'receipt'"'"');\n", $1, $1, $1 }'
		echo "\\pset format unaligned"
		echo "\\pset fieldsep ' '"
		echo "\\pset tuples_only on"
		echo "$MEMQ;"
	} >"$BENCH_DIR/many_touch.sql"
	mpsql manyq -f "$BENCH_DIR/many_touch.sql" | tail -n 1 |
		awk '{ printf "%.3f %.3f %.3f\n", $1 / 1048576, $2 / 1048576, $3 / 1048576 }'
}
read -r M1 M1P M1C <<<"$(mem_touch 1 0)"
read -r M0 M0P M0C <<<"$(mem_touch "$MANYQ_TOUCH" 0)"
read -r MH MHP MHC <<<"$(mem_touch "$MANYQ_TOUCH" 100)"
result manyq_mem_1q "$M1" MB 1 - "(CachedPlan* $(fmt "$M1P" 1), CacheMemoryContext $(fmt "$M1C" 1); a session that touched 1 queue)"
result manyq_mem_touched "$M0" MB 1 "$M1" "(CachedPlan* $(fmt "$M0P" 1), CacheMemoryContext $(fmt "$M0C" 1); $MANYQ_TOUCH queues touched, plan_cache_queues 0; ratio: / 1 queue)"
result manyq_mem_touched_pc100 "$MH" MB 1 "$M1" "(CachedPlan* $(fmt "$MHP" 1), CacheMemoryContext $(fmt "$MHC" 1); $MANYQ_TOUCH queues touched, plan_cache_queues 100; ratio: / 1 queue)"
result manyq_mem_kb_per_queue "$(awk -v a="$M0" -v b="$M1" -v n="$MANYQ_TOUCH" 'BEGIN { print (n > 1 ? (a - b) * 1024 / (n - 1) : 0) }')" KB 1 - "(plan_cache_queues 0)"

# "sent deleted" over every queue of manyq, from the counters alone:
# queue.stats also counts each queue's messages, opening every queue's table
# in one statement, which runs out of lock slots at 10,000 queues
sent_deleted() {
	mval manyq "SELECT coalesce(sum(c.sent), 0) || ' ' || coalesce(sum(c.deleted), 0)
	              FROM queue._queues q, LATERAL queue._counters(q.queue_id) c"
}

# e: the cycle spread over MANYQ_TOUCH queues against one queue
many_cycle() {
	local nq=$MANYQ_TOUCH sync=$MANYQ_SYNC before after missed
	case $1 in
	one) nq=1 ;;
	# pgb puts its SYNC argument into PGOPTIONS
	spread_pc100) sync="$MANYQ_SYNC -c queue.plan_cache_queues=100" ;;
	esac
	before=$(sent_deleted)
	PGB_DB=manyq pgb "$SCRIPTS/many_cycle_b1.sql" "$MANYQ_CLIENTS" "$sync" "-T $MANYQ_SECS" -P 1 -D nq="$nq"
	LAST[$1]+=" $(sed -n 's/^progress: [0-9.]* s, \([0-9.]*\) tps.*/\1/p' <<<"$OUT" | tail -n 1)"
	after=$(sent_deleted)
	check "many queues cycle $1: sent" "${after%% *}" "$(awk -v b="$before" -v t="$TX" 'BEGIN { split(b, x, " "); print x[1] + t }')"
	missed=$(awk -v b="$before" -v a="$after" -v t="$TX" 'BEGIN { split(b, x, " "); split(a, y, " "); print x[2] + t - y[2] }')
	[ "$missed" = 0 ] || echo "  note: $missed of $TX receives came back empty (many queues cycle $1)"
	# shellcheck disable=SC2034 # read by measure (run.sh)
	M=$TPS
}
# MANYQ_PREFILL messages waiting in each queue: a receive never comes back
# empty (its snapshot may miss a send that committed after it started while
# the others take the ones it sees; pgbench's \gset would then fail)
seq 1 "$MANYQ_TOUCH" | awk -v n="$MANYQ_PREFILL" '{ printf "SELECT count(*) FROM queue.send_batch('"'"'m%d'"'"', array_fill('"'"'x'"'"'::text, ARRAY[%d]));\n", $1, n }' \
	>"$BENCH_DIR/many_fill.sql"
mpsql manyq -f "$BENCH_DIR/many_fill.sql" >/dev/null
mpsql manyq -c "VACUUM ANALYZE" -c "CHECKPOINT"
declare -A LAST=()
measure "many queues cycle" many_cycle -- one spread spread_pc100
for k in one spread spread_pc100; do LAST[$k]=$(median <<<"${LAST[$k]}"); done
result manyq_cycle_1q "${MED[one]}" msgs/s 0 - "($MANYQ_CLIENTS clients, synchronous_commit $MANYQ_SYNC, ${MANYQ_SECS}s; last second $(fmt "${LAST[one]}"))"
result manyq_cycle_spread "${MED[spread]}" msgs/s 0 "${MED[one]}" \
	"($MANYQ_TOUCH queues; ratio: / 1 queue; last second $(fmt "${LAST[spread]}"), $(ratio "${LAST[spread]}" "${LAST[one]}") of 1 queue's)"
result manyq_cycle_spread_pc100 "${MED[spread_pc100]}" msgs/s 0 "${MED[one]}" \
	"($MANYQ_TOUCH queues, plan_cache_queues 100; ratio: / 1 queue; last second $(fmt "${LAST[spread_pc100]}"), $(ratio "${LAST[spread_pc100]}" "${LAST[one]}") of 1 queue's)"

# g: a noisy neighbour: the cycle on m1 alone, and while a neighbour queue
# holding MANYQ_NOISY_BACKLOG (1,000,000) messages churns them (one
# pgbench client running the batch-10 cycle on it at MANYQ_NOISY_RATE (200)
# cycles/s, 2,000 messages/s, in the background), the neighbour shared
# (its rows in m1's tables) or dedicated (its own), interleaved.  On 2
# cores the neighbour also takes CPU from m1's clients: the dedicated
# neighbour gives that share, the shared one what sharing the tables adds.
if [ "${MANYQ_NOISY:-1}" = 1 ]; then
	MANYQ_NOISY_BACKLOG=${MANYQ_NOISY_BACKLOG:-1000000}
	MANYQ_NOISY_RATE=${MANYQ_NOISY_RATE:-200}
	mval manyq "SELECT queue.create('noisy_s', dedicated => false), queue.create('noisy_d', dedicated => true)" >/dev/null
	for nq in noisy_s noisy_d; do
		seq 1 $((MANYQ_NOISY_BACKLOG / 1000)) |
			awk -v q="$nq" '{ printf "SELECT count(*) FROM queue.send_batch('"'"'%s'"'"', array_fill('"'"'x'"'"'::text, ARRAY[1000]));\n", q }' \
				>"$BENCH_DIR/many_noisy_fill.sql"
		mpsql manyq -f "$BENCH_DIR/many_noisy_fill.sql" >/dev/null
	done
	mpsql manyq -c "VACUUM ANALYZE" -c "CHECKPOINT"
	noisy_cycle() {
		local churn=""
		if [ "$1" != alone ]; then
			PGOPTIONS="-c synchronous_commit=$MANYQ_SYNC" "$BINDIR/pgbench" -n -M prepared -c 1 -j 1 \
				-T $((MANYQ_SECS + 1)) -R "$MANYQ_NOISY_RATE" -h "$BENCH_DIR" -p "$PORT" -U postgres \
				-D queue="noisy_${1#n_}" -D body="$BODY" -D batch=10 -f "$SCRIPTS/std_cycle_bn.sql" manyq \
				>"$BENCH_DIR/many_noisy_churn.out" 2>&1 &
			churn=$!
		fi
		PGB_DB=manyq pgb "$SCRIPTS/many_cycle_b1.sql" "$MANYQ_CLIENTS" "$MANYQ_SYNC" "-T $MANYQ_SECS" -D nq=1
		if [ -n "$churn" ]; then
			wait "$churn" || { cat "$BENCH_DIR/many_noisy_churn.out" >&2; die "the noisy neighbour's pgbench failed"; }
			NOISY_TPS[$1]+=" $(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$BENCH_DIR/many_noisy_churn.out")"
		fi
		# shellcheck disable=SC2034 # read by measure (run.sh)
		M=$TPS
	}
	declare -A NOISY_TPS=()
	measure "noisy neighbour" noisy_cycle -- alone n_s n_d
	result manyq_noisy_shared "${MED[n_s]}" msgs/s 0 "${MED[alone]}" \
		"(m1's cycle while a shared neighbour churns its $MANYQ_NOISY_BACKLOG messages at $(fmt "$(median <<<"${NOISY_TPS[n_s]}")") cycles of 10/s; ratio: / alone, $(fmt "${MED[alone]}")/s)"
	result manyq_noisy_dedicated "${MED[n_d]}" msgs/s 0 "${MED[alone]}" \
		"(the same with a dedicated neighbour, $(fmt "$(median <<<"${NOISY_TPS[n_d]}")") cycles of 10/s: the CPU it takes; shared/dedicated neighbour $(ratio "${MED[n_s]}" "${MED[n_d]}"))"
	mval manyq "SELECT queue.drop('noisy_s'), queue.drop('noisy_d')" >/dev/null
fi

# f: drop them
timed manyq "$BENCH_DIR/many_drop.sql"
echo "  queues: $MN dropped in $SECS_TAKEN s (per s, first and last tenth: $TENTHS)"
read -r Q_FIRST Q_LAST <<<"$TENTHS"
result manyq_drop "$(per_s "$MN" "$SECS_TAKEN")" queues/s 0 "$FLOOR_DROP" "(floor: $(fmt "$FLOOR_DROP") tables/s; first tenth $Q_FIRST/s, last tenth $Q_LAST/s)"
check "many queues: queues left after the drops" "$(mval manyq "SELECT count(*) FROM queue.queues")" 0
# the worker leaves a database without the extension; FORCE for the rest
mpsql manyq -c "DROP EXTENSION queue"
psql_run <<<"DROP DATABASE manyq WITH (FORCE)"
