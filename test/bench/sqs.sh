# test/bench/sqs.sh - section 8 of run.sh (sourced): the SQS endpoint.
#
# Needs queue_sqs (start_cluster turns queue.sqs_listen on when it is
# installed) and libcurl's headers for the client, test/bench/sqs_bench.c
# (keep-alive connections, AWS JSON 1.0, SigV4-signed like the SDKs).
#
#  a. the full cycle over HTTP, SQS_CLIENTS clients, batch 10
#     (SendMessageBatch -> ReceiveMessage 10 -> DeleteMessageBatch) and
#     batch 1 (SendMessage -> ReceiveMessage -> DeleteMessage), against the
#     SQL full cycle of the same shape (pgbench, std_cycle_*), runs
#     alternating, synchronous_commit on for both (the endpoint's
#     transactions take the server's setting)
#  b. long poll over HTTP: from a send's commit (SQL, autocommit) to the
#     parked ReceiveMessage's answer: median and p99
#  c. SQS_PARK long polls parked at once: the endpoint workers' memory
#     (proportional set size, smaps_rollup) before and while they wait, and
#     the number of processes (never one per request)
#  d. one sequential SDK client (boto3, the JS SDK v3), batch 1 and 10,
#     against one SQL client of the same cycle (test/bench/sqs_sdk.sh)
#
# Printed, never asserted.

SQS_CLIENTS=${SQS_CLIENTS:-8}
SQS_PARK=${SQS_PARK:-1000}
SQS_LP_ROUNDS=${SQS_LP_ROUNDS:-200}

sqs_pids() { psql_val "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE backend_type LIKE 'queue sqs%'"; }
sqs_pss_kb() {
	local kb=0 p v
	for p in $(sqs_pids); do
		v=$(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)
		kb=$((kb + ${v:-0}))
	done
	echo "$kb"
}

echo "== SQS endpoint: HTTP against SQL, $SQS_CLIENTS clients, long poll, $SQS_PARK parked long polls (test/bench/sqs_bench.c) $(el)"
if [ -z "$SQS_PORT" ]; then
	echo "SKIP sqs: queue_sqs is not installed"
elif ! cc -O2 -I"$("$PG_CONFIG" --includedir)" -o "$BENCH_DIR/sqs_bench" "$HERE/sqs_bench.c" \
	-L"$("$PG_CONFIG" --libdir)" -lpq -lcurl -lcrypto -lpthread 2>"$BENCH_DIR/sqs_bench.err"; then
	cat "$BENCH_DIR/sqs_bench.err"
	echo "SKIP sqs: the client does not build (needs libcurl4-openssl-dev and libssl-dev)"
else
	SQS_URL="http://127.0.0.1:$SQS_PORT/"
	read -r SQS_KEY SQS_SECRET <<<"$(psql_val "SELECT access_key_id || ' ' || secret_access_key FROM queue.create_access_key('postgres')")"
	echo "endpoint:   $SQS_URL, queue.sqs_workers = $(psql_val "SHOW queue.sqs_workers")"
	for b in 10 1; do
		sqls="" https=""
		for r in $(seq 1 "$RUNS"); do
			for kind in sql http; do
				if [ "$kind" = sql ]; then
					cycle_one std "$SQS_CLIENTS" "$b" on
					sqls+=" $M"
					echo "  run $r/$RUNS sql  b$b: $(fmt "$M") msgs/s"
				else
					reset_queue "$QUEUE" false 1 "$PREFILL"
					out=$("$BENCH_DIR/sqs_bench" cycle "$SQS_URL" "$SQS_KEY" "$SQS_SECRET" "$QUEUE" \
						"$SQS_CLIENTS" "$b" "$SECS" 2>&1) || {
						echo "WARN sqs cycle b$b: $out"
						CHECKS_FAILED=$((CHECKS_FAILED + 1))
					}
					m=$(sed -n 's/^\([0-9.]*\) messages\/s.*/\1/p' <<<"$out")
					https+=" $m"
					echo "  run $r/$RUNS http b$b: $out"
				fi
			done
		done
		s=$(median <<<"$sqls")
		result "sqs_sql_cycle_c${SQS_CLIENTS}_b$b" "$s" msgs/s 0 self
		result "sqs_http_cycle_c${SQS_CLIENTS}_b$b" "$(median <<<"$https")" msgs/s 0 "$s" "(HTTP / SQL)"
	done

	reset_queue "$QUEUE" false 1 0
	out=$("$BENCH_DIR/sqs_bench" longpoll "$SQS_URL" "$SQS_KEY" "$SQS_SECRET" "$QUEUE" "$SQS_LP_ROUNDS" \
		"host=$BENCH_DIR port=$PORT user=postgres dbname=postgres" 2>&1) || {
		echo "WARN sqs longpoll: $out"
		CHECKS_FAILED=$((CHECKS_FAILED + 1))
	}
	echo "  longpoll: $out"
	result sqs_longpoll_median "$(sed -n 's/^median \([0-9.]*\) ms.*/\1/p' <<<"$out")" ms 3 -
	result sqs_longpoll_p99 "$(sed -n 's/.*p99 \([0-9.]*\) ms.*/\1/p' <<<"$out")" ms 3 -

	before=$(sqs_pss_kb)
	procs_before=$(psql_val "SELECT count(*) FROM pg_stat_activity")
	"$BENCH_DIR/sqs_bench" park "$SQS_URL" "$SQS_KEY" "$SQS_SECRET" "$QUEUE" "$SQS_PARK" 8 >"$BENCH_DIR/park.out" 2>&1 &
	park_pid=$!
	sleep 6
	during=$(sqs_pss_kb)
	procs_during=$(psql_val "SELECT count(*) FROM pg_stat_activity")
	wait "$park_pid" || true
	echo "  park: $(cat "$BENCH_DIR/park.out"); server processes $procs_before before, $procs_during while parked"
	result sqs_parked_memory_added "$(awk -v a="$during" -v b="$before" 'BEGIN { print (a - b) / 1024 }')" MB 1 - \
		"($SQS_PARK parked long polls, all endpoint workers, Pss)"
fi

# shellcheck source=sqs_sdk.sh
. "$HERE/sqs_sdk.sh"
