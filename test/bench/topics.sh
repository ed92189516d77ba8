# test/bench/topics.sh - section 5 of run.sh (sourced): topics.
#
#  a. publish to a topic with 1 subscribed queue against queue.send to that
#     queue (TOPIC_CLIENTS clients, batch 1, body BODY_BYTES): msgs/s
#  b. a TOPIC_BIG_BYTES body published to TOPIC_FANOUT subscribed queues
#     against sending it to one queue: messages published per second, and
#     the bytes stored per published message over the bytes one sent
#     message takes ("copies" of the body: each subscribed queue keeps its
#     own copy of the message)
#  c. publish of a tagged message to a topic with TOPIC_MANY_SUBS
#     subscriptions of which one matches (the others filter on another tag)
#     against a topic with one subscription: msgs/s (the filters are
#     matched in memory, no statement per subscription)
#
# Runs of a and b start from fresh queues and topics; c's topics are made
# once (TOPIC_MANY_SUBS queues take a while to create).  Printed, never
# asserted.

TOPIC_CLIENTS=${TOPIC_CLIENTS:-8}
TOPIC_FANOUT=${TOPIC_FANOUT:-10}
TOPIC_BIG_BYTES=${TOPIC_BIG_BYTES:-10240}
TOPIC_MANY_SUBS=${TOPIC_MANY_SUBS:-1000}
TOPIC_SYNC=${TOPIC_SYNC:-${SYNC_COMMITS%% *}}
# A body that compresses about as little as real payloads: hex digits of
# md5 chains (TOAST's pglz cannot shrink it much).
BIG_BODY=$("${PSQL[@]}" -At -c "SELECT string_agg(md5(i::text), '') FROM generate_series(1, $TOPIC_BIG_BYTES / 32) i")

# reset_topic N: queues bench_t1..N subscribed to topic bench_topic, empty.
reset_topic() {
	local n=$1
	psql_run <<SQL
SET client_min_messages = warning;
SELECT queue.drop_topic('bench_topic', if_exists => true);
SELECT queue.drop(q.queue_name) FROM queue.queues q WHERE q.queue_name LIKE 'bench_t%';
SELECT queue.create_topic('bench_topic');
SELECT queue.create('bench_t' || i) FROM generate_series(1, $n) i;
SELECT queue.subscribe('bench_topic', 'bench_t' || i) FROM generate_series(1, $n) i;
VACUUM ANALYZE;
CHECKPOINT;
SQL
}

# bytes of the queues bench_t*: tables, indexes and TOAST
topic_bytes() {
	psql_val "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
	            JOIN queue.queues q ON c.relnamespace = 'queue_data'::regnamespace
	             AND c.relname IN ('q' || q.queue_id, 'd' || q.queue_id, 'a' || q.queue_id)
	           WHERE q.queue_name LIKE 'bench_t%'"
}

# topic_one KIND BODY_KIND: KIND send (queue.send to bench_t1, one queue)
# or publish (to bench_topic with FANOUT queues); sets M (msgs/s) and BYTES
# (bytes stored per message).
topic_one() {
	local kind=$1 fanout=$2 body=$3 before s got want
	reset_topic "$fanout"
	before=$(topic_bytes)
	if [ "$kind" = send ]; then
		s=$(script std send 1)
		pgb "$s" "$TOPIC_CLIENTS" "$TOPIC_SYNC" "-T $SECS" -D queue=bench_t1 -D body="$body"
		got=$(psql_val "SELECT sent FROM queue.stats WHERE queue_name = 'bench_t1'")
		want=$TX
	else
		s=$SCRIPTS/topic_publish_b1.sql
		pgb "$s" "$TOPIC_CLIENTS" "$TOPIC_SYNC" "-T $SECS" -D topic=bench_topic -D body="$body"
		got=$(psql_val "SELECT sum(sent) FROM queue.stats WHERE queue_name LIKE 'bench_t%'")
		want=$((TX * fanout))
	fi
	check "topics $kind x$fanout: messages in the queues" "$got" "$want"
	M=$TPS
	BYTES=$(awk -v a="$(topic_bytes)" -v b="$before" -v n="$TX" 'BEGIN { print (n > 0 ? (a - b) / n : 0) }')
}
topic_small() { topic_one "$1" 1 "$BODY"; }
topic_big() { topic_one "$1" "$([ "$1" = send ] && echo 1 || echo "$TOPIC_FANOUT")" "$BIG_BODY"; }

echo "== topics: $TOPIC_CLIENTS clients, synchronous_commit $TOPIC_SYNC $(el)"
measure "topic 1 queue" topic_small -- send publish
result topic_send_1q "${MED[send]}" msgs/s 0 -
result topic_publish_1q "${MED[publish]}" msgs/s 0 - "vs_send=$(ratio "${MED[publish]}" "${MED[send]}")"
declare -A TB=()
measure "topic ${TOPIC_BIG_BYTES}B" topic_big -- send publish
result topic_send_big "${MED[send]}" msgs/s 0 - "(${TOPIC_BIG_BYTES} B body, 1 queue)"
result topic_publish_big "${MED[publish]}" msgs/s 0 - "vs_send=$(ratio "${MED[publish]}" "${MED[send]}") (${TOPIC_BIG_BYTES} B body, $TOPIC_FANOUT queues)"
# bytes of the last run of each kind
topic_big send; SEND_BYTES=$BYTES
topic_big publish; PUB_BYTES=$BYTES
result topic_big_bytes_per_send "$SEND_BYTES" B 0 -
result topic_big_bytes_per_publish "$PUB_BYTES" B 0 - "copies=$(ratio "$PUB_BYTES" "$SEND_BYTES")"

# c: topics bench_f1 (one subscription, matching) and bench_fmany
# (TOPIC_MANY_SUBS, one matching); queues bench_fq0 (the matching one) and
# bench_fq1.. (filtering on tag "miss").  Queues are dropped in chunks: one
# statement dropping them all would run out of lock slots.
psql_run <<SQL
SET client_min_messages = warning;
SELECT queue.drop_topic('bench_topic', if_exists => true);
SELECT queue.drop(q.queue_name) FROM queue.queues q WHERE q.queue_name LIKE 'bench_t%';
SELECT queue.create_topic('bench_f1');
SELECT queue.create_topic('bench_fmany');
SELECT queue.create('bench_fq0');
SELECT queue.subscribe('bench_f1', 'bench_fq0', filter_tags => '{hit}');
SELECT queue.subscribe('bench_fmany', 'bench_fq0', filter_tags => '{hit}');
SQL
for ((i = 1; i < TOPIC_MANY_SUBS; i += 100)); do
	psql_run <<SQL
SELECT queue.create('bench_fq' || i) FROM generate_series($i, least($i + 99, $TOPIC_MANY_SUBS - 1)) i;
SELECT queue.subscribe('bench_fmany', 'bench_fq' || i, filter_tags => '{miss}')
FROM generate_series($i, least($i + 99, $TOPIC_MANY_SUBS - 1)) i;
SQL
done
psql_run <<SQL
VACUUM ANALYZE;
CHECKPOINT;
SQL
topic_filter() {
	local topic=bench_f1
	[ "$1" = many ] && topic=bench_fmany
	pgb "$SCRIPTS/topic_publish_tagged_b1.sql" "$TOPIC_CLIENTS" "$TOPIC_SYNC" "-T $SECS" \
		-D topic="$topic" -D body="$BODY"
	M=$TPS
}
measure "topic filters" topic_filter -- one many
result topic_publish_1sub "${MED[one]}" msgs/s 0 - "(1 subscription, matching)"
result topic_publish_many_subs "${MED[many]}" msgs/s 0 - \
	"vs_1sub=$(ratio "${MED[many]}" "${MED[one]}") ($TOPIC_MANY_SUBS subscriptions, 1 matching)"
check "topics: only the matching queue got messages" \
	"$(psql_val "SELECT coalesce(sum(sent), 0) FROM queue.stats WHERE queue_name LIKE 'bench_fq%' AND queue_name <> 'bench_fq0'")" 0
psql_run <<SQL
SELECT queue.drop_topic('bench_f1');
SELECT queue.drop_topic('bench_fmany');
SQL
for ((i = 0; i < TOPIC_MANY_SUBS; i += 100)); do
	psql_val "SELECT count(queue.drop('bench_fq' || i)) FROM generate_series($i, least($i + 99, $TOPIC_MANY_SUBS - 1)) i" >/dev/null
done
