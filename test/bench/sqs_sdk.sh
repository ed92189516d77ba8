# test/bench/sqs_sdk.sh - the SQS endpoint under one sequential SDK client
# (issue 36), against the same operations in SQL in the same run.
#
# Sourced by sqs.sh (part d of section 8 of run.sh), or run alone on a
# throwaway cluster of its own (lib.sh's), as `make bench` never does:
#
#   PG_CONFIG=... bash test/bench/sqs_sdk.sh      (QUICK=1: 1 run of 2 s)
#
# For batch 1 and 10, each the median of RUNS runs of SECS seconds,
# alternating: the full cycle (send, receive up to the batch, delete what
# came) by one sequential client of
#   sql      pgbench, 1 client (test/bench/std_cycle_*.sql, -M prepared)
#   boto3    Debian's boto3 1.26 (Query protocol; test/bench/sqs_sdk.py)
#   js       the AWS SDK for JavaScript v3 of examples/sqs/node (AWS JSON 1.0;
#            test/bench/sqs_sdk.mjs)
# every request signed (SigV4) and answered one after another, SDK overhead
# included; synchronous_commit on for all.  Printed, never asserted: BENCH
# lines sqs_sdk_<client>_c1_b<batch> <msgs/s> with the ratio to SQL's.

sqs_sdk_main() {
	local b r kind out m sqls boto js key secret url
	echo "== SQS endpoint: one sequential SDK client against SQL (test/bench/sqs_sdk.sh) $(el)"
	if [ -z "$SQS_PORT" ]; then
		echo "SKIP sqs_sdk: queue_sqs is not installed"
		return
	fi
	if ! /usr/bin/python3 -I -c 'import boto3' 2>/dev/null; then
		echo "SKIP sqs_sdk: no Debian python3-boto3"
		return
	fi
	read -r key secret <<<"$(psql_val "SELECT access_key_id || ' ' || secret_access_key FROM queue.create_access_key('postgres')")"
	url="http://127.0.0.1:$SQS_PORT"
	for b in 1 10; do
		sqls="" boto="" js=""
		for r in $(seq 1 "$RUNS"); do
			for kind in sql boto3 js; do
				reset_queue "$QUEUE" false 1 "$PREFILL"
				case $kind in
				sql)
					pgb "$(script std cycle "$b")" 1 on "-T $SECS" -D batch="$b"
					m=$(awk -v t="$TPS" -v b="$b" 'BEGIN { print t * b }')
					sqls+=" $m"
					echo "  run $r/$RUNS sql   b$b: $(fmt "$m") msgs/s"
					;;
				boto3)
					out=$(/usr/bin/python3 -I "$HERE/sqs_sdk.py" "$url" "$key" "$secret" "$QUEUE" "$b" "$SECS" 2>&1) ||
						{ echo "WARN sqs_sdk boto3 b$b: $out"; CHECKS_FAILED=$((CHECKS_FAILED + 1)); }
					m=$(sed -n 's/^\([0-9.]*\) messages\/s.*/\1/p' <<<"$out")
					boto+=" $m"
					echo "  run $r/$RUNS boto3 b$b: $out"
					;;
				js)
					if [ ! -f "$HERE/../../examples/sqs/node/node_modules/@aws-sdk/client-sqs/package.json" ]; then
						echo "  SKIP js: no examples/sqs/node/node_modules (test/setup.sh)"
						continue
					fi
					out=$(node "$HERE/sqs_sdk.mjs" "$url" "$key" "$secret" "$QUEUE" "$b" "$SECS" 2>&1 |
						grep -v -e NodeVersionSupportWarning -e '^versions published' -e '^will require' \
							-e '^To continue' -e '^and security' -e '^More information' -e '^(Use `node' -e '^$') ||
						{ echo "WARN sqs_sdk js b$b: $out"; CHECKS_FAILED=$((CHECKS_FAILED + 1)); }
					m=$(sed -n 's/^\([0-9.]*\) messages\/s.*/\1/p' <<<"$out")
					js+=" $m"
					echo "  run $r/$RUNS js    b$b: $out"
					;;
				esac
			done
		done
		m=$(median <<<"$sqls")
		result "sqs_sdk_sql_c1_b$b" "$m" msgs/s 0 self
		result "sqs_sdk_boto3_c1_b$b" "$(median <<<"$boto")" msgs/s 0 "$m" "(boto3 / SQL)"
		[ -n "$js" ] && result "sqs_sdk_js_c1_b$b" "$(median <<<"$js")" msgs/s 0 "$m" "(JS SDK / SQL)"
	done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	# alone: a throwaway cluster of lib.sh's, with the endpoint
	HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	if [ "${QUICK:-0}" = 1 ]; then RUNS=${RUNS:-1}; SECS=${SECS:-2}; else RUNS=${RUNS:-3}; SECS=${SECS:-5}; fi
	PREFILL=${PREFILL:-1000}
	# shellcheck source=alone.sh
	. "$HERE/alone.sh"
	echo "runs:       median of $RUNS x ${SECS}s; queue.sqs_workers = $(psql_val 'SHOW queue.sqs_workers'); synchronous_commit on"
	for _ in $(seq 1 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$SQS_PORT") 2>/dev/null && break
		sleep 0.1
	done
	sqs_sdk_main
	[ "$CHECKS_FAILED" = 0 ] || echo "WARN $CHECKS_FAILED check(s) failed"
else
	sqs_sdk_main
fi
