# test/bench/consumers.sh - section 6 of run.sh (sourced): consumers.
#
#  a. push latency: CONSUMER_LAT_N messages sent one per transaction, a
#     few milliseconds apart, to a queue with an idle consumer; the time
#     from the sender's commit (the body is clock_timestamp() taken in the
#     sending transaction, so the commit itself is included) to the start
#     of the handler that gets it (clock_timestamp() there): median and p99
#     in ms.  Sender and handler read the same clock.
#  b. throughput: CONSUMER_N messages waiting, then a consumer (batch 10,
#     concurrency 2) whose handler inserts each message into a table drains
#     them: msgs/s from its creation to the last message handled, against
#     the standard full cycle of the same shape (2 clients, batch 10: send
#     10, receive 10, delete them), measured just before it.
#
# Printed, never asserted.

CONSUMER_LAT_N=${CONSUMER_LAT_N:-500}
CONSUMER_N=${CONSUMER_N:-100000}
CONSUMER_SYNC=${CONSUMER_SYNC:-${SYNC_COMMITS%% *}}

psql_run <<SQL
SET client_min_messages = warning;
SELECT queue.drop_consumer('bench_c_lat', if_exists => true);
SELECT queue.drop_consumer('bench_c_sink', if_exists => true);
SELECT queue.drop('bench_c_lat', if_exists => true);
SELECT queue.drop('bench_c_sink', if_exists => true);
DROP TABLE IF EXISTS bench_c_latency, bench_c_sunk;
CREATE TABLE bench_c_latency (sent timestamptz, started timestamptz);
CREATE TABLE bench_c_sunk (message_id bigint, body text);
CREATE OR REPLACE FUNCTION bench_c_lat_handler(msgs queue.message[]) RETURNS void
	LANGUAGE sql AS \$\$
	INSERT INTO public.bench_c_latency
	SELECT (m).body::timestamptz, clock_timestamp() FROM unnest(msgs) m
\$\$;
CREATE OR REPLACE FUNCTION bench_c_sink_handler(msgs queue.message[]) RETURNS void
	LANGUAGE sql AS \$\$
	INSERT INTO public.bench_c_sunk SELECT (m).message_id, (m).body FROM unnest(msgs) m
\$\$;
-- sends one message per transaction, each carrying its send time
CREATE OR REPLACE PROCEDURE bench_c_send(n int, pause float8)
	LANGUAGE plpgsql AS \$\$
BEGIN
	FOR i IN 1 .. n LOOP
		PERFORM queue.send('bench_c_lat', clock_timestamp()::text);
		COMMIT;
		PERFORM pg_sleep(pause);
	END LOOP;
END
\$\$;
SELECT queue.create('bench_c_lat');
SQL

# wait_for SQL: poll (every 50 ms, at most 10 minutes) until SQL says t
wait_for() {
	local i
	for ((i = 0; i < 12000; i++)); do
		[ "$(psql_val "$1")" = t ] && return 0
		sleep 0.05
	done
	echo "WARN consumers: timed out waiting for: $1"
	CHECKS_FAILED=$((CHECKS_FAILED + 1))
	return 1
}

echo "== consumers: push latency, $CONSUMER_LAT_N messages, synchronous_commit $CONSUMER_SYNC $(el)"
psql_val "SELECT queue.create_consumer('bench_c_lat', 'bench_c_lat', 'bench_c_lat_handler(queue.message[])')" >/dev/null
wait_for "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'queue consumer'"
# one message first, so the consumer is past its start
PGOPTIONS="-c synchronous_commit=$CONSUMER_SYNC" "${PSQL[@]}" -qc "CALL bench_c_send(1, 0)" >/dev/null
wait_for "SELECT count(*) = 1 FROM bench_c_latency"
psql_run <<<"TRUNCATE bench_c_latency;"
PGOPTIONS="-c synchronous_commit=$CONSUMER_SYNC" "${PSQL[@]}" -qc "CALL bench_c_send($CONSUMER_LAT_N, 0.005)" >/dev/null
wait_for "SELECT count(*) >= $CONSUMER_LAT_N FROM bench_c_latency"
LAT=$(psql_val "SELECT round((percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::numeric, 3) || ' ' ||
                       round((percentile_cont(0.99) WITHIN GROUP (ORDER BY ms))::numeric, 3) || ' ' ||
                       round(max(ms)::numeric, 3)
                  FROM (SELECT extract(epoch FROM started - sent) * 1000 AS ms FROM bench_c_latency) l")
read -r LAT_MED LAT_P99 LAT_MAX <<<"$LAT"
result consumer_latency_median "$LAT_MED" ms 3 - "(commit to handler start, $CONSUMER_LAT_N messages)"
result consumer_latency_p99 "$LAT_P99" ms 3 - "(max $LAT_MAX ms)"
psql_val "SELECT queue.drop_consumer('bench_c_lat')" >/dev/null

echo "== consumers: throughput, $CONSUMER_N messages, batch 10, concurrency 2, synchronous_commit $CONSUMER_SYNC $(el)"
# the standard full cycle of the same shape, for comparison
reset_queue "$QUEUE" false 1 100
pgb "$(script std cycle 10)" 2 "$CONSUMER_SYNC" "-T $SECS" -D batch=10
CYCLE=$(awk -v t="$TPS" 'BEGIN { print t * 10 }')
result consumer_cycle_c2_b10 "$CYCLE" msgs/s 0 - "(standard full cycle, 2 clients, batch 10)"
psql_run <<SQL
SELECT queue.create('bench_c_sink');
-- (the body names g, so the lateral call runs once per g, not once in all)
SELECT count(*) FROM generate_series(1, $CONSUMER_N / 1000) g,
	LATERAL queue.send_batch('bench_c_sink', array_fill((:'body' || repeat('', g))::text, ARRAY[1000]));
VACUUM ANALYZE;
CHECKPOINT;
SQL
T0=$(date +%s.%N)
PGOPTIONS="-c synchronous_commit=$CONSUMER_SYNC" "${PSQL[@]}" -qc \
	"SELECT queue.create_consumer('bench_c_sink', 'bench_c_sink', 'bench_c_sink_handler(queue.message[])', batch_size => 10, concurrency => 2)" >/dev/null
wait_for "SELECT count(*) >= $CONSUMER_N FROM bench_c_sunk"
T1=$(date +%s.%N)
RATE=$(awk -v n="$CONSUMER_N" -v a="$T0" -v b="$T1" 'BEGIN { print n / (b - a) }')
result consumer_drain_b10_c2 "$RATE" msgs/s 0 "$CYCLE" "(vs the cycle above; $CONSUMER_N messages in $(fmt "$(awk -v a="$T0" -v b="$T1" 'BEGIN { print b - a }')" 1) s)"
check "consumers: every message handled once" \
	"$(psql_val "SELECT count(*) || ' ' || count(DISTINCT message_id) FROM bench_c_sunk")" "$CONSUMER_N $CONSUMER_N"
psql_run <<SQL
SELECT queue.drop_consumer('bench_c_sink');
SELECT queue.drop('bench_c_sink');
SELECT queue.drop('bench_c_lat');
DROP TABLE bench_c_latency, bench_c_sunk;
DROP FUNCTION bench_c_lat_handler(queue.message[]), bench_c_sink_handler(queue.message[]);
DROP PROCEDURE bench_c_send(int, float8);
SQL
