# shellcheck shell=bash
# test/bench/rate.sh - section 12 of run.sh (sourced; RATE=0 skips it), or
# alone: `bash test/bench/rate.sh` (PG_CONFIG names the PostgreSQL): what
# rate limits cost when they never bind (DESIGN.md "Rate limits and
# priorities", issue 51).  The standard full cycle (send, receive, delete;
# RATE_CLIENTS clients, batches 1 and 10, RATE_SECS a run, interleaved run
# by run), msgs/s and the ratio:
#  a. no group ids: no limit, against receive_rate_limit = 1,000,000,000
#     a second (reserved and settled on every receive, never binding)
#  b. RATE_TENANTS tenants: no limit (the fair receive), against
#     receive_rate_limit_per_group = 1,000,000,000 a second
#  c. no group ids: no priorities, against priorities 3, 4 and 5 (uniform,
#     the prefill too), read level by level
# A queue without limits pays one test per receive; the build before rate
# limits is compared by test/bench/versus.sh (section 1's cycles).
# Printed, never asserted.

RATE_CLIENTS=${RATE_CLIENTS:-8}
RATE_SECS=${RATE_SECS:-10}
RATE_TENANTS=${RATE_TENANTS:-1000}
RATE_SYNC=${RATE_SYNC:-off}
RATE_PARTS=${RATE_PARTS:-"queue prio tenant"}	# which of a, c, b to run

if [ -z "${BENCH_DIR:-}" ]; then
	HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	SQS=0
	# shellcheck source=alone.sh
	. "$HERE/alone.sh"
	RUNS=${RUNS:-3}
	PREFILL=${PREFILL:-1000}
fi

echo "== rate limits and priorities $(el)"
write_fair_scripts

# rate_one KIND B: plain / queue (no group ids), fair / tenant (RATE_TENANTS tenants)
rate_one() {
	local kind=$1 b=$2 tenants=0 args="" s r d
	case $kind in
	queue) args=", receive_rate_limit => 1000000000" ;;
	fair) tenants=$RATE_TENANTS ;;
	tenant) tenants=$RATE_TENANTS; args=", receive_rate_limit_per_group => 1000000000" ;;
	esac
	if [ "$kind" = prio ]; then
		reset_fair bench_rate 0 "$PREFILL" x "" \
			", priorities => ARRAY(SELECT 3 + floor(random() * 3)::int FROM generate_series(1, f.n))"
		pgb "$(script prio cycle "$b")" "$RATE_CLIENTS" "$RATE_SYNC" "-T $RATE_SECS" -D queue=bench_rate \
			-D batch="$b"
	else
		reset_fair bench_rate "$tenants" "$PREFILL" x "$args"
		# the previous run's tenants keep their windows (rate.c's entries)
		# for an interval after their queue went: past it, their entries
		# leave room for this run's (an owner's share of the table is
		# 1,250 entries by default, two runs' tenants 2,000)
		[ "$kind" = tenant ] && sleep 1.1
		pgb "$(script fair cycle "$b")" "$RATE_CLIENTS" "$RATE_SYNC" "-T $RATE_SECS" -D queue=bench_rate \
			-D batch="$b" -D tenants="$tenants"
	fi
	read -r s r d <<<"$(counters bench_rate)"
	M=$(awk -v d="$d" -v s="$DUR" 'BEGIN { print (s > 0 ? d / s : 0) }')
	check "rate cycle $kind c$RATE_CLIENTS b$b: received - deleted" "$((r - d))" 0
	check "rate cycle $kind c$RATE_CLIENTS b$b: held back" \
		"$(psql_val "SELECT rate_limited FROM queue.stats WHERE queue_name = 'bench_rate'")" 0
}

for b in 1 10; do
	if [[ " $RATE_PARTS " == *" queue "* ]]; then
		measure "rate cycle b$b" rate_one "$b" -- plain queue
		result "rate_cycle_plain_b${b}_$RATE_SYNC" "${MED[plain]}" msgs/s 0 -
		result "rate_cycle_queue_limit_b${b}_$RATE_SYNC" "${MED[queue]}" msgs/s 0 - \
			"vs_plain=$(ratio "${MED[queue]}" "${MED[plain]}")"
	fi
	if [[ " $RATE_PARTS " == *" prio "* ]]; then
		measure "priority cycle b$b" rate_one "$b" -- plain prio
		result "priority_cycle_plain_b${b}_$RATE_SYNC" "${MED[plain]}" msgs/s 0 -
		result "priority_cycle_3_levels_b${b}_$RATE_SYNC" "${MED[prio]}" msgs/s 0 - \
			"vs_plain=$(ratio "${MED[prio]}" "${MED[plain]}")"
	fi
	if [[ " $RATE_PARTS " == *" tenant "* ]]; then
		measure "rate cycle t$RATE_TENANTS b$b" rate_one "$b" -- fair tenant
		result "rate_cycle_t${RATE_TENANTS}_b${b}_$RATE_SYNC" "${MED[fair]}" msgs/s 0 -
		result "rate_cycle_t${RATE_TENANTS}_tenant_limit_b${b}_$RATE_SYNC" "${MED[tenant]}" msgs/s 0 - \
			"vs_no_limit=$(ratio "${MED[tenant]}" "${MED[fair]}")"
	fi
done
