# test/bench/lib.sh - helpers of test/bench/run.sh (sourced, not run):
# the throwaway cluster, fresh queues and floor tables, pgbench runs, medians
# and result lines.  Reads the settings run.sh sets (HERE, BINDIR, BODY, ...).

die() { echo "bench: FAIL: $*" >&2; exit 1; }

# --- the throwaway cluster ---------------------------------------------------

if [ "$(id -u)" = 0 ]; then
	id postgres >/dev/null 2>&1 || die "running as root needs an OS user 'postgres'"
	as_pg() { runuser -u postgres -- "$@"; }
else
	as_pg() { "$@"; }
fi

BENCH_DIR=$(mktemp -d /tmp/queue-bench.XXXXXX)
chmod 755 "$BENCH_DIR"
[ "$(id -u)" = 0 ] && chown postgres: "$BENCH_DIR"
DATA=$BENCH_DIR/data
LOG=$BENCH_DIR/server.log
SCRIPTS=$BENCH_DIR/scripts
mkdir -p "$SCRIPTS"

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

start_cluster() {
	PORT=${BENCH_PORT:-}
	if [ -z "$PORT" ]; then
		for p in $(seq $((55432 + RANDOM % 500)) 56999); do
			if port_free "$p"; then PORT=$p; break; fi
		done
		[ -n "$PORT" ] || die "no free port in 55432..56999"
	fi
	local preload="'queue'"
	if [ ! -f "$PKGLIBDIR/queue.so" ]; then
		[ "$BENCH_FLOOR_ONLY" = 1 ] || die "$PKGLIBDIR/queue.so is not installed (run make install, or BENCH_FLOOR_ONLY=1)"
		preload="''"
	fi
	# the SQS endpoint (section 8) when its library is installed
	SQS_PORT=""
	local sqs_conf=""
	if [ "${SQS:-1}" = 1 ] && [ -f "$PKGLIBDIR/queue_sqs.so" ] && [ "$preload" != "''" ]; then
		for p in $(seq $((PORT + 1000)) $((PORT + 1100))); do
			if port_free "$p"; then SQS_PORT=$p; break; fi
		done
		[ -n "$SQS_PORT" ] && sqs_conf="queue.sqs_listen = '127.0.0.1:$SQS_PORT'
queue.sqs_workers = ${SQS_WORKERS:-2}"
	fi
	as_pg "$BINDIR/initdb" -D "$DATA" -A trust -U postgres -E UTF8 --locale=C >"$BENCH_DIR/initdb.log" 2>&1 ||
		{ cat "$BENCH_DIR/initdb.log" >&2; die "initdb failed"; }
	# synchronous_commit stays at its default (on) in the file: runs with
	# it off set it per connection (PGOPTIONS), so setup is never affected.
	# Autovacuum stays at its defaults.
	cat >>"$DATA/postgresql.conf" <<EOF

# --- queue bench (test/bench/run.sh) ---
port = $PORT
listen_addresses = ''
unix_socket_directories = '$BENCH_DIR'
shared_preload_libraries = $preload
shared_buffers = 1GB
max_connections = 80
# A waiting receive whose client left is noticed within a second (the
# long-poll runs follow each other; see docs/long-polling.md).
client_connection_check_interval = 1000
max_wal_size = 8GB
# the held-horizon section's prepared holder (bloat.sh)
max_prepared_transactions = 4
# counters for every queue of the many-queues section (up to 100,000 and
# more): the worker leaves an idle queue alone only if it has a slot
queue.max_queues = ${BENCH_MAX_QUEUES:-131072}
$sqs_conf
# BENCH_EXTRA_CONF: more settings for one run (say log_min_messages =
# debug1, to read the worker's compactions in the server log BENCH_KEEP=1 keeps)
${BENCH_EXTRA_CONF:-}
EOF
	as_pg "$BINDIR/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null || die "the server did not start"
}

PSQL=()
psql_init() { PSQL=("$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$BENCH_DIR" -p "$PORT" -U postgres -d postgres); }
psql_val() { "${PSQL[@]}" -At -c "$1"; }
psql_run() { "${PSQL[@]}" -v body="$BODY" >/dev/null; }	# SQL on stdin

# The floor's scripts come in two variants, made here from the one text:
# pk (the primary key alone; receive in id order) and idx (plus an index on
# (visible_at, id); receive in that order).
make_scripts() {
	local f
	for f in "$HERE"/*.sql; do
		case $(basename "$f") in
		floor_*)
			sed 's/@ORDER@/id/' "$f" >"$SCRIPTS/$(basename "$f" | sed 's/^floor_/floor_pk_/')"
			sed 's/@ORDER@/visible_at, id/' "$f" >"$SCRIPTS/$(basename "$f" | sed 's/^floor_/floor_idx_/')"
			;;
		*) cp "$f" "$SCRIPTS/" ;;
		esac
	done
}

# script KIND OP BATCH -> path (KIND: floor_pk, floor_idx, std, std_dedup,
# fifo; a _b1 script where there is one, else the _bn one).
script() {
	if [ "$3" = 1 ] && [ -f "$SCRIPTS/$1_$2_b1.sql" ]; then
		echo "$SCRIPTS/$1_$2_b1.sql"
	else
		echo "$SCRIPTS/$1_$2_bn.sql"
	fi
}

# --- fresh queues --------------------------------------------------------------

# reset_floor VARIANT VISIBLE [LEASED]: a fresh hand-written queue (pk: the
# primary key alone; idx: also an index on (visible_at, id)) holding LEASED
# messages in flight (ids 1..LEASED, their ids in bench_handles) and then
# VISIBLE visible ones.
reset_floor() {
	local variant=$1 visible=$2 leased=${3:-0} index=""
	[ "$variant" = idx ] && index="CREATE INDEX bench_floor_visible ON bench_floor (visible_at, id);"
	psql_run <<EOF
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_floor, bench_handles;
CREATE TABLE bench_floor (
	id            bigserial PRIMARY KEY,
	visible_at    timestamptz NOT NULL DEFAULT now(),
	body          text NOT NULL,
	receive_count int NOT NULL DEFAULT 0);
$index
INSERT INTO bench_floor (visible_at, body, receive_count)
	SELECT now() + interval '1 hour', :'body', 1 FROM generate_series(1, $leased);
INSERT INTO bench_floor (visible_at, body) SELECT now(), :'body' FROM generate_series(1, $visible);
CREATE TABLE bench_handles (n int PRIMARY KEY, id bigint, receipt text);
INSERT INTO bench_handles (n, id) SELECT id, id FROM bench_floor WHERE id <= $leased;
VACUUM ANALYZE bench_floor, bench_handles;
CHECKPOINT;
EOF
}

# reset_queue NAME FIFO GROUPS VISIBLE [LEASED]: a fresh queue of the
# extension (FIFO: messages spread over GROUPS groups) holding LEASED
# messages in flight (leased for an hour; receipts in bench_handles) and then
# VISIBLE visible ones.  Filled with send_batch in chunks of 1000, its
# largest batch.
# the create's layout argument: the kind's (BENCH_DEDICATED, run.sh), every
# queue dedicated (BENCH_LAYOUT=dedicated), or none for a build before 1.4
# (BENCH_LAYOUT=old), to compare a dedicated queue with 1.3 (docs/commands.md,
# make bench)
layout_arg() {
	case ${BENCH_LAYOUT:-} in
	old) ;;
	dedicated) echo ", dedicated => true" ;;
	*) echo ", dedicated => ${BENCH_DEDICATED:-false}" ;;
	esac
}
reset_queue() {
	local name=$1 fifo=$2 groups=$3 visible=$4 leased=${5:-0} extra="" take=""
	if [ "$fifo" = true ]; then
		extra=", message_group_ids => ARRAY(SELECT 'g' || (1 + (g * 1000 + s) % $groups)
		                                      FROM generate_series(1, n) AS s),
		         deduplication_ids => ARRAY(SELECT 'fill-' || tag || '-' || (g * 1000 + s)
		                                      FROM generate_series(1, n) AS s)"
	fi
	if [ "$leased" -gt 0 ]; then
		# One receive per chunk (max_messages depends on g, so each is its
		# own call); a FIFO queue is not filled this way (not needed).
		take="INSERT INTO bench_handles (n, receipt)
	SELECT row_number() OVER (), r.receipt
	  FROM generate_series(0, ($leased - 1) / 1000) AS g,
	       LATERAL queue.receive('$name', max_messages => least(1000, $leased - g * 1000),
	                             visibility_timeout => '1 hour') AS r;"
	fi
	psql_run <<EOF
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_handles;
CREATE TABLE bench_handles (n int PRIMARY KEY, id bigint, receipt text);
SELECT queue.drop('$name', if_exists => true);
-- a shared queue's rows are the worker's to delete after a drop: done here,
-- before the measurement, as dropping a dedicated queue's tables is
-- (a build before 1.4 has no queue._reclaim: PL/pgSQL parses a statement
-- when it first runs it, so the loop stays unparsed there)
DO \$\$ BEGIN
	IF to_regclass('queue._reclaim') IS NOT NULL THEN
		WHILE EXISTS (SELECT FROM queue._reclaim) LOOP
			IF queue._reclaim_step(100000) = 0 THEN PERFORM pg_sleep(0.01); END IF;
		END LOOP;
	END IF;
END \$\$;
SELECT queue.create('$name', fifo => $fifo$(layout_arg));
CREATE TEMP TABLE fill AS
	SELECT 'l' AS tag, g, least(1000, $leased - g * 1000) AS n
	  FROM generate_series(0, ($leased - 1) / 1000) AS g WHERE $leased > 0;
SELECT count(*) FROM fill, LATERAL queue.send_batch('$name', array_fill(:'body'::text, ARRAY[n]) $extra);
$take
SELECT count(*) FROM bench_handles HAVING count(*) <> $leased;
DROP TABLE fill;
CREATE TEMP TABLE fill AS
	SELECT 'v' AS tag, g, least(1000, $visible - g * 1000) AS n
	  FROM generate_series(0, ($visible - 1) / 1000) AS g WHERE $visible > 0;
SELECT count(*) FROM fill, LATERAL queue.send_batch('$name', array_fill(:'body'::text, ARRAY[n]) $extra);
VACUUM ANALYZE;
CHECKPOINT;
EOF
	QID=$(psql_val "SELECT queue_id FROM queue.queues WHERE queue_name = '$name'")
	[ "$(psql_val "SELECT count(*) FROM bench_handles")" = "$leased" ] ||
		die "reset_queue $name: $leased messages should be leased"
}

# counters NAME -> "sent received deleted" of the extension's queue
counters() {
	psql_val "SELECT coalesce(sent, -1) || ' ' || coalesce(received, -1) || ' ' || coalesce(deleted, -1)
	            FROM queue.stats WHERE queue_name = '$1'"
}

# queue_size NAME -> bytes of the queue's tables and their indexes
queue_size() {
	psql_val "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)
	            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	           WHERE n.nspname = 'queue_data' AND c.relkind = 'r'
	             AND c.relname ~ ('^[qdag]' || (SELECT queue_id FROM queue.queues
	                                             WHERE queue_name = '$1') || '\$')"
}

# --- pgbench -----------------------------------------------------------------

# pgb SCRIPT CLIENTS SYNC LENGTH [pgbench args...]: one pgbench run, LENGTH
# "-T secs" or "-t transactions per client".  Sets TPS (transactions per
# second, without connection time), TX (transactions run), DUR (seconds, TX /
# TPS) and OUT (the whole output).  PGB_DB names another database than
# postgres (many.sh's).
pgb() {
	local script=$1 c=$2 sync=$3 len=$4 logoff
	shift 4
	logoff=$(stat -c %s "$LOG")
	OUT=$(PGOPTIONS="-c synchronous_commit=$sync" "$BINDIR/pgbench" -n -M prepared --failures-detailed $len -c "$c" -j "$c" \
		-h "$BENCH_DIR" -p "$PORT" -U postgres \
		-D queue="$QUEUE" -D body="$BODY" -D i=0 "$@" \
		-f "$script" "${PGB_DB:-postgres}" 2>&1) || {
		echo "$OUT" >&2
		die "pgbench $(basename "$script") -c $c failed"
	}
	TPS=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$OUT")
	TX=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$OUT")
	[ -n "$TPS" ] && [ -n "$TX" ] || { echo "$OUT" >&2; die "no tps in pgbench output"; }
	# Failed transactions (a deadlock or serialization failure, which
	# pgbench counts and goes on) are reported, not fatal: they are
	# findings.  Other errors abort the client and end the bench above.
	FAILED=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$OUT")
	if [ "${FAILED:-0}" != 0 ]; then
		echo "WARN pgbench $(basename "$script") -c $c: $FAILED failed transaction(s):" \
			"$(sed -n 's/^number of \(serialization\|deadlock\) failures: \([0-9]*\).*/\2 \1/p' <<<"$OUT" | paste -sd, -)"
		{ tail -c +$((logoff + 1)) "$LOG" | grep 'ERROR:' || true; } | sed 's/^.*ERROR: */    server log: /' | sort | uniq -c | tail -n 3
		CHECKS_FAILED=$((CHECKS_FAILED + 1))
	fi
	DUR=$(awk -v t="$TX" -v r="$TPS" 'BEGIN { printf "%.4f", (r > 0 ? t / r : 0) }')
}

# stmt_latency N -> mean latency in ms of the Nth command of the last pgb
# run (needs -r).
stmt_latency() {
	awk -v n="$1" '/^statement latencies/ { on = 1; next }
		on && $1 ~ /^[0-9.]+$/ { if (++k == n) { print $1; exit } }' <<<"$OUT"
}

# --- figures -------------------------------------------------------------------

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END {
	if (NR == 0) { print "nan"; exit }
	if (NR % 2) m = v[(NR + 1) / 2]; else m = (v[NR / 2] + v[NR / 2 + 1]) / 2; print m }'; }
fmt() { awk -v v="$1" -v d="${2:-0}" 'BEGIN { if (v == "" || v == "nan" || v == "-") print "-"; else printf "%.*f\n", d, v }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f\n", a / b }'; }
# bigger A B -> the larger of two numbers ("-" counts as nothing)
bigger() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || a == "") print b; else if (b == "-" || b == "") print a; else print (a + 0 >= b + 0 ? a : b) }'; }

declare -A RES
# result NAME VALUE UNIT DIGITS FLOOR [EXTRA...]: store RES[NAME] and print
# "BENCH NAME VALUE UNIT RATIO [EXTRA...]" (RATIO = VALUE / FLOOR; "1.00" for
# a floor itself, given as FLOOR "self"; "-" when there is no floor).
result() {
	local name=$1 v=$2 unit=$3 d=$4 floor=$5 r
	shift 5
	RES[$name]=$v
	case $floor in
	self) r=1.00 ;;
	-) r=- ;;
	*) r=$(ratio "$v" "$floor") ;;
	esac
	echo "BENCH $name $(fmt "$v" "$d") $unit $r${*:+ $*}"
}

CHECKS_FAILED=0
check() {	# WHAT GOT EXPECTED
	if [ "$2" != "$3" ]; then
		echo "WARN $1: got $2, expected $3"
		CHECKS_FAILED=$((CHECKS_FAILED + 1))
	fi
}

# add_visible NAME COUNT: COUNT more visible messages in a standard queue.
# add_visible_fifo QUEUE N GROUPS: N more visible messages on a FIFO
# queue, spread over GROUPS groups, each with a unique deduplication id.
add_visible_fifo() {
	psql_run <<EOF2
SET client_min_messages = warning;
SELECT count(*) FROM generate_series(0, ($2 - 1) / 1000) AS g,
	LATERAL queue.send_batch('$1', array_fill(:'body'::text, ARRAY[least(1000, $2 - g * 1000)]),
		message_group_ids => ARRAY(SELECT 'g' || (1 + (g * 1000 + s) % $3)
		                             FROM generate_series(1, least(1000, $2 - g * 1000)) AS s),
		deduplication_ids => ARRAY(SELECT 'scale-' || (g * 1000 + s)
		                             FROM generate_series(1, least(1000, $2 - g * 1000)) AS s))
 WHERE $2 > 0;
VACUUM ANALYZE;
CHECKPOINT;
EOF2
}

add_visible() {
	psql_run <<EOF2
SET client_min_messages = warning;
SELECT count(*) FROM generate_series(0, ($2 - 1) / 1000) AS g,
	LATERAL queue.send_batch('$1', array_fill(:'body'::text, ARRAY[least(1000, $2 - g * 1000)]))
 WHERE $2 > 0;
VACUUM ANALYZE;
CHECKPOINT;
EOF2
}

# measure LABEL FUNC ARGS... -- KINDS...: RUNS runs of "FUNC KIND ARGS..."
# for each kind, alternating the order of the kinds from run to run so drift
# in the machine falls on all alike; sets MED[kind] to the median of M.
declare -A MED
measure() {
	local label=$1 fn=$2 args=() kinds=() order k r
	shift 2
	while [ "$1" != -- ]; do args+=("$1"); shift; done
	shift
	kinds=("$@")
	declare -A got=()
	for r in $(seq 1 "$RUNS"); do
		if [ $((r % 2)) = 1 ]; then order=("${kinds[@]}"); else
			order=(); for ((k = ${#kinds[@]} - 1; k >= 0; k--)); do order+=("${kinds[k]}"); done
		fi
		for k in "${order[@]}"; do
			"$fn" "$k" "${args[@]}"
			got[$k]+=" $M"
			[ "$RUNS" = 1 ] || echo "  run $r/$RUNS $label $k: $(fmt "$M" 3)"
		done
	done
	MED=()
	for k in "${kinds[@]}"; do MED[$k]=$(median <<<"${got[$k]}"); done
}

# reset_fair NAME TENANTS N [BODY] [ARGS]: a fresh shared queue (more
# queue.create arguments in ARGS) holding N messages, each of one of TENANTS
# tenants at random (0: no group ids)
reset_fair() {
	local name=$1 tenants=$2 n=$3 body=${4:-x} args=${5:-} groups="${6:-}"
	[ "$tenants" -gt 0 ] && groups=", message_group_ids => ARRAY(SELECT 't' || (1 + floor(random() * $tenants)::int)
	                                      FROM generate_series(1, f.n))"
	psql_run <<EOF
SET client_min_messages = warning;
SELECT queue.drop('$name', if_exists => true);
DO \$\$ BEGIN
	WHILE EXISTS (SELECT FROM queue._reclaim) LOOP
		IF queue._reclaim_step(100000) = 0 THEN PERFORM pg_sleep(0.01); END IF;
	END LOOP;
END \$\$;
SELECT queue.create('$name', dedicated => false $args);
SELECT count(*) FROM (SELECT least(1000, $n - g * 1000) AS n FROM generate_series(0, ($n - 1) / 1000) g
                      WHERE $n > 0) f,
	LATERAL queue.send_batch('$name', array_fill('$body'::text, ARRAY[f.n]) $groups);
VACUUM ANALYZE;
CHECKPOINT;
EOF
}

# write_fair_scripts: the fair cycle's pgbench scripts (fair.sh, rate.sh)
write_fair_scripts() {
cat >"$SCRIPTS/fair_cycle_b1.sql" <<'EOF'
-- the standard cycle, batch 1, the message of one of :tenants tenants (0: none)
\set t random(1, greatest(:tenants, 1))
SELECT message_id FROM queue.send(:queue, :body::text,
	message_group_id => CASE WHEN :tenants > 0 THEN 't' || :t END);
SELECT count(*) AS got, min(receipt) AS receipt FROM queue.receive(:queue) \gset
\if :got > 0
SELECT queue.delete(:queue, :receipt);
\endif
EOF
cat >"$SCRIPTS/prio_cycle_b1.sql" <<'EOF'
-- the standard cycle, batch 1, the message of priority 3, 4 or 5 (uniform)
\set p random(3, 5)
SELECT message_id FROM queue.send(:queue, :body::text, priority => :p);
SELECT count(*) AS got, min(receipt) AS receipt FROM queue.receive(:queue) \gset
\if :got > 0
SELECT queue.delete(:queue, :receipt);
\endif
EOF
cat >"$SCRIPTS/prio_cycle_bn.sql" <<'EOF'
-- the standard cycle, batch :batch, each message of priority 3, 4 or 5 (uniform)
SELECT count(*) FROM queue.send_batch(:queue, array_fill(:body::text, ARRAY[:batch::int]),
	priorities => ARRAY(SELECT 3 + floor(random() * 3)::int FROM generate_series(1, :batch::int)));
SELECT count(*) AS got, array_agg(receipt) AS receipts
  FROM queue.receive(:queue, max_messages => :batch::int) \gset
\if :got > 0
SELECT count(*) FROM queue.delete_batch(:queue, :receipts::text[]);
\endif
EOF
cat >"$SCRIPTS/fair_cycle_bn.sql" <<'EOF'
-- the standard cycle, batch :batch, each message of one of :tenants tenants (0: none)
SELECT count(*) FROM queue.send_batch(:queue, array_fill(:body::text, ARRAY[:batch::int]),
	message_group_ids => CASE WHEN :tenants > 0 THEN ARRAY(SELECT 't' || (1 + floor(random() * :tenants)::int)
	                                                        FROM generate_series(1, :batch::int)) END);
SELECT count(*) AS got, array_agg(receipt) AS receipts
  FROM queue.receive(:queue, max_messages => :batch::int) \gset
\if :got > 0
SELECT count(*) FROM queue.delete_batch(:queue, :receipts::text[]);
\endif
EOF
}
