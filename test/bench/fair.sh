# test/bench/fair.sh - section 9 of run.sh (sourced): fair queues
# (DESIGN.md "Fair queues", issue 26).
#
#  a. cost: the full cycle (send, receive, delete; FAIR_CLIENTS clients,
#     batches 1 and 10, FAIR_SECS a run: the first seconds of a fresh
#     queue vary most) on a queue whose messages carry one of
#     FAIR_TENANTS group ids at random, against the same queue without
#     group ids, interleaved run by run (measure): msgs/s and the ratio
#  b. dwell: a noisy tenant's backlog of FAIR_BACKLOG messages, and
#     FAIR_QUIET quiet tenants sending FAIR_QUIET_RATE messages/s each
#     (pgbench -R), while FAIR_CONSUMERS consumers receive batches of 10
#     and delete them as fast as they can, for FAIR_DWELL_SECS: the quiet
#     messages' dwell (sent_at, the send's statement just before its
#     commit, to the receive), p50 and p99.  Three runs: the fair queue
#     with the backlog, the same without it (the baseline the target
#     compares with), and a queue whose messages carry no group ids with
#     the backlog (the contrast: oldest first)
#  FAIR_PARTS ("cost dwell cap") picks the parts.
#
#  c. the cap: FAIR_CAP_MESSAGES messages over FAIR_CAP_TENANTS tenants on
#     a queue with max_in_flight_per_group FAIR_CAP, received (batches of
#     10, each receive and delete its own statement) by 8 clients until
#     drained, while a ninth session reads queue.group_stats as fast as it
#     can: the most in flight any tenant had in a committed state seen
#
# Printed, never asserted.

FAIR_PARTS=${FAIR_PARTS:-"cost dwell cap"}
FAIR_CLIENTS=${FAIR_CLIENTS:-8}
FAIR_SECS=${FAIR_SECS:-10}
FAIR_TENANTS=${FAIR_TENANTS:-1000}
FAIR_SYNC=${FAIR_SYNC:-off}
FAIR_BACKLOG=${FAIR_BACKLOG:-100000}
FAIR_QUIET=${FAIR_QUIET:-50}
FAIR_QUIET_RATE=${FAIR_QUIET_RATE:-10}
FAIR_CONSUMERS=${FAIR_CONSUMERS:-4}
FAIR_DWELL_SECS=${FAIR_DWELL_SECS:-10}
FAIR_CAP=${FAIR_CAP:-5}
FAIR_CAP_TENANTS=${FAIR_CAP_TENANTS:-20}
FAIR_CAP_MESSAGES=${FAIR_CAP_MESSAGES:-100000}

echo "== fair queues $(el)"

write_fair_scripts

# fair_one KIND B: KIND plain (no group ids) or fair (FAIR_TENANTS tenants)
fair_one() {
	local kind=$1 b=$2 tenants=0 got s r d
	[ "$kind" = fair ] && tenants=$FAIR_TENANTS
	reset_fair bench_fair "$tenants" "$PREFILL"
	pgb "$(script fair cycle "$b")" "$FAIR_CLIENTS" "$FAIR_SYNC" "-T $FAIR_SECS" -D queue=bench_fair \
		-D batch="$b" -D tenants="$tenants"
	got=$(counters bench_fair)
	read -r s r d <<<"$got"
	# msgs/s: the messages deleted (a fair receive can come back short
	# when the tenants it chose were leased by others meanwhile)
	M=$(awk -v d="$d" -v s="$DUR" 'BEGIN { print (s > 0 ? d / s : 0) }')
	check "fair cycle $kind c$FAIR_CLIENTS b$b: sent, received - deleted" "$s $((r - d))" \
		"$((PREFILL + TX * b)) 0"
	[ "$r" -le $((TX * b)) ] || check "fair cycle $kind c$FAIR_CLIENTS b$b: received <= receives x batch" "$r" "<= $((TX * b))"
	SHORT[$kind]=$(awk -v r="$r" -v w="$((TX * b))" 'BEGIN { printf "%.3f", (w > 0 ? 1 - r / w : 0) }')
}

declare -A FAIR_RATIO SHORT
for b in 1 10; do
	[[ " $FAIR_PARTS " == *" cost "* ]] || break
	measure "fair cycle b$b" fair_one "$b" -- plain fair
	result "fair_cycle_plain_b${b}_$FAIR_SYNC" "${MED[plain]}" msgs/s 0 -
	result "fair_cycle_t${FAIR_TENANTS}_b${b}_$FAIR_SYNC" "${MED[fair]}" msgs/s 0 - \
		"vs_plain=$(ratio "${MED[fair]}" "${MED[plain]}")" "(share of receive places left empty in the last run: ${SHORT[fair]})"
	FAIR_RATIO[$b]=$(ratio "${MED[fair]}" "${MED[plain]}")
done

# --- b. dwell -------------------------------------------------------------------

cat >"$SCRIPTS/fair_quiet.sql" <<'EOF'
-- a quiet tenant's send: one of :quiet tenants, or no group id (:grouped 0)
\set t random(1, :quiet)
SELECT queue.send(:queue, 'quiet', message_group_id => CASE WHEN :grouped = 1 THEN 'q' || :t END);
EOF
cat >"$SCRIPTS/fair_consume.sql" <<'EOF'
-- a consumer: receive 10, delete them, keep the quiet messages' dwell (ms)
SELECT count(*) AS got, array_agg(receipt) AS receipts,
       coalesce(array_agg(extract(epoch FROM clock_timestamp() - sent_at) * 1000)
                FILTER (WHERE body = 'quiet'), '{}') AS dwell
  FROM queue.receive(:queue, 10) \gset
\if :got > 0
SELECT count(*) FROM queue.delete_batch(:queue, :receipts::text[]);
INSERT INTO bench_dwell SELECT unnest(:dwell::float8[]);
\endif
EOF

# dwell_one KIND BACKLOG: KIND fair (group ids) or plain; prints and sets
# DW50, DW99 (ms) and LEFT (backlog messages not received at the end)
dwell_one() {
	local kind=$1 backlog=$2 grouped=1 tenants=1 n
	[ "$kind" = plain ] && { grouped=0; tenants=0; }
	reset_fair bench_dwell "$tenants" "$backlog" noisy
	psql_val "DROP TABLE IF EXISTS bench_dwell; CREATE TABLE bench_dwell (ms float8, at timestamptz DEFAULT clock_timestamp())" >/dev/null
	PGOPTIONS="-c synchronous_commit=$FAIR_SYNC" "$BINDIR/pgbench" -n -M prepared -c 1 -j 1 \
		-R $((FAIR_QUIET * FAIR_QUIET_RATE)) -T "$FAIR_DWELL_SECS" -h "$BENCH_DIR" -p "$PORT" -U postgres \
		-D queue=bench_dwell -D quiet="$FAIR_QUIET" -D grouped="$grouped" \
		-f "$SCRIPTS/fair_quiet.sql" postgres >"$BENCH_DIR/fair_quiet.out" 2>&1 &
	local producer=$!
	pgb "$SCRIPTS/fair_consume.sql" "$FAIR_CONSUMERS" "$FAIR_SYNC" "-T $FAIR_DWELL_SECS" -D queue=bench_dwell
	wait "$producer" || die "the quiet producer failed: $(tail -n 3 "$BENCH_DIR/fair_quiet.out")"
	read -r n DW50 DW99 <<<"$(psql_val "SELECT count(*), coalesce(round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1), 0),
		coalesce(round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1), 0) FROM bench_dwell" | tr '|' ' ')"
	LEFT=$(psql_val "SELECT count(*) FROM queue.peek('bench_dwell', 1000000) WHERE body = 'noisy'")
	echo "  dwell $kind backlog $backlog: $n quiet messages received, p50 $DW50 ms, p99 $DW99 ms; noisy left $LEFT"
	echo "    p99 (ms) and messages by 2 s of the run: $(psql_val "
		SELECT string_agg(format('%s s: %s (%s)', b * 2, p, n), ', ' ORDER BY b) FROM (
			SELECT b, round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1) AS p, count(*) AS n
			  FROM (SELECT floor(extract(epoch FROM at - min(at) OVER ()) / 2) AS b, ms FROM bench_dwell) d
			 GROUP BY b) x")"
}

declare -A DW
if [[ " $FAIR_PARTS " == *" dwell "* ]]; then
dwell_one fair "$FAIR_BACKLOG"; DW[fair99]=$DW99; DW[fair50]=$DW50; DW[left]=$LEFT
dwell_one fair 0; DW[base99]=$DW99; DW[base50]=$DW50
dwell_one plain "$FAIR_BACKLOG"; DW[plain99]=$DW99; DW[plain50]=$DW50
result fair_dwell_p99_noisy "${DW[fair99]}" ms 1 - "vs_alone=$(ratio "${DW[fair99]}" "${DW[base99]}")" \
	"(p50 ${DW[fair50]} ms; backlog left ${DW[left]})"
result fair_dwell_p99_alone "${DW[base99]}" ms 1 - "(p50 ${DW[base50]} ms)"
result fair_dwell_p99_no_groups "${DW[plain99]}" ms 1 - "(p50 ${DW[plain50]} ms: oldest first, behind the backlog)"
fi

# --- c. the cap -------------------------------------------------------------------

cat >"$SCRIPTS/fair_cap.sql" <<'EOF'
-- a receiver of the capped queue: receive 10, then delete them (two statements)
SELECT count(*) AS got, array_agg(receipt) AS receipts FROM queue.receive(:queue, 10) \gset
\if :got > 0
SELECT count(*) FROM queue.delete_batch(:queue, :receipts::text[]);
\endif
EOF
cat >"$SCRIPTS/fair_cap_watch.sql" <<'EOF'
-- the watcher: the most in flight of any tenant, as committed now
INSERT INTO bench_cap_seen SELECT coalesce(max(in_flight), 0) FROM queue.group_stats(:queue, 10000);
EOF
if [[ " $FAIR_PARTS " == *" cap "* ]]; then
reset_fair bench_cap "$FAIR_CAP_TENANTS" "$FAIR_CAP_MESSAGES"
psql_val "SELECT queue.alter('bench_cap', max_in_flight_per_group => $FAIR_CAP);
	DROP TABLE IF EXISTS bench_cap_seen; CREATE TABLE bench_cap_seen (n bigint)" >/dev/null
PGOPTIONS="-c synchronous_commit=$FAIR_SYNC" "$BINDIR/pgbench" -n -M prepared -c 1 -j 1 -T 600 \
	-h "$BENCH_DIR" -p "$PORT" -U postgres -D queue=bench_cap \
	-f "$SCRIPTS/fair_cap_watch.sql" postgres >"$BENCH_DIR/fair_watch.out" 2>&1 &
WATCHER=$!
cap_t0=$(date +%s.%N)
# until drained (then stopped): 8 receivers
PGOPTIONS="-c synchronous_commit=$FAIR_SYNC" "$BINDIR/pgbench" -n -M prepared -c 8 -j 8 -T 600 \
	-h "$BENCH_DIR" -p "$PORT" -U postgres -D queue=bench_cap \
	-f "$SCRIPTS/fair_cap.sql" postgres >"$BENCH_DIR/fair_cap.out" 2>&1 &
CAPPGB=$!
while [ "$(psql_val "SELECT count(*) FROM queue.peek('bench_cap', 1)")" != 0 ]; do
	kill -0 "$CAPPGB" 2>/dev/null || die "the capped receivers stopped: $(tail -n 3 "$BENCH_DIR/fair_cap.out")"
	sleep 0.5
done
kill -0 "$WATCHER" 2>/dev/null || die "the watcher stopped: $(tail -n 3 "$BENCH_DIR/fair_watch.out")"
kill "$CAPPGB" 2>/dev/null || true; wait "$CAPPGB" 2>/dev/null || true
kill "$WATCHER" 2>/dev/null || true; wait "$WATCHER" 2>/dev/null || true
cap_secs=$(awk -v a="$cap_t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
read -r seen reads <<<"$(psql_val "SELECT max(n), count(*) FROM bench_cap_seen" | tr '|' ' ')"
read -r capdel <<<"$(counters bench_cap | cut -d' ' -f3)"
echo "  cap $FAIR_CAP over $FAIR_CAP_TENANTS tenants: $capdel of $FAIR_CAP_MESSAGES deleted in $cap_secs s by 8 receivers;" \
	"the most in flight a tenant had in $reads readings: $seen"
check "fair cap: every message deleted" "$capdel" "$FAIR_CAP_MESSAGES"
result fair_cap_max_in_flight_seen "$seen" msgs 0 - "(cap $FAIR_CAP; $reads readings over $cap_secs s)"
fi
