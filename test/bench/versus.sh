#!/bin/bash
# test/bench/versus.sh [REV] [ROUNDS]: this tree's build against REV's
# (default 1a8a553: 1.3.2, the last build before the shared layout), the
# full cycles of section 1 (run.sh) on a dedicated queue, side by side.
#
# Two builds cannot be loaded by one server (both are $libdir/queue), so
# they take turns: each round installs one build, runs run.sh, installs
# the other, runs it again, the order reversed every other round (old new,
# new old, ...), all on this machine in one go.  REV's queues are
# dedicated (every queue was before 1.4: BENCH_LAYOUT=old); this tree's
# are made dedicated (BENCH_LAYOUT=dedicated).  It prints each shape's
# median over the rounds for both builds and new/old.  It installs into
# the PostgreSQL that pg_config names and leaves this tree's build
# installed.  Never part of make test.
#
# The shapes are run.sh's (its variables apply); by default CLIENTS=8,
# BATCHES="1 10", synchronous_commit off, FIFO c8_b10 with 100 and 10,000
# groups, RUNS=3 SECS=5 within each run.  About 4 minutes a run, 2 runs a
# round: ROUNDS=2 takes about 16 minutes.
#
# VERSUS_SQS=1: section 8 (the SQS endpoint's full cycle over HTTP beside
# the same cycle in SQL, test/bench/sqs.sh) runs too and is compared; with
# CLIENTS=" " BATCHES=" " FIFO_SHAPES=" " it runs alone.
#
# VERSUS_LAYOUT=same: REV is 1.4 or later; both builds run the same shapes
# on shared queues, each beside its dedicated twin (STORAGE_PAIRS=1), and
# the dedicated figures are compared too (cycle_std_ded_*).
#
# VERSUS_RATE=1: section 12 (test/bench/rate.sh: rate limits and
# priorities; RATE_PARTS picks its parts, e.g. prio) runs too and its
# cycles are compared (priority_cycle_*, rate_cycle_*); REV must have it.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
REV=${1:-1a8a553}
ROUNDS=${2:-2}
OUT=$(mktemp -d /tmp/queue-versus.XXXXXX)
WT="$OUT/old"

git -C "$ROOT" worktree add -f -q "$WT" "$REV"
trap 'git -C "$ROOT" worktree remove --force "$WT" 2>/dev/null || true' EXIT
make -C "$WT" -j2 >/dev/null 2>&1 || { echo "versus: $REV does not build" >&2; exit 1; }
make -C "$ROOT" -j2 >/dev/null 2>&1

export RUNS=${RUNS:-3} SECS=${SECS:-5} OPS=${OPS:-" "} LP=0 SCALE=0 SOAK=0 TOPICS=0 CONSUMERS=0 MANYQ=0 SQS=${VERSUS_SQS:-0} FAIR=0 CITUS=0 BLOAT=0 RATE=${VERSUS_RATE:-0}
export CLIENTS=${CLIENTS:-8} BATCHES=${BATCHES:-"1 10"} SYNC_COMMITS=${SYNC_COMMITS:-off}
export FIFO_SYNCS=${FIFO_SYNCS:-off} FIFO_SHAPES=${FIFO_SHAPES:-c8_b10} FIFO_GROUPS=${FIFO_GROUPS:-"100 10000"}
VERSUS_LAYOUT=${VERSUS_LAYOUT:-}
export STORAGE_PAIRS=0
[ "$VERSUS_LAYOUT" = same ] && STORAGE_PAIRS=1

# run_build old|new ROUND: install that build, run run.sh, keep its BENCH lines
run_build() {
	local dir=$ROOT layout=dedicated
	[ "$1" = old ] && { dir=$WT; layout=old; }
	[ "$VERSUS_LAYOUT" = same ] && layout=
	make -C "$dir" install >/dev/null 2>&1
	echo "== round $2: $1 ($(git -C "$dir" log --format='%h %s' -1 | cut -c1-60))"
	BENCH_LAYOUT=$layout bash "$ROOT/test/bench/run.sh" >"$OUT/$1.$2.out" 2>&1 ||
		{ tail -n 20 "$OUT/$1.$2.out" >&2; echo "versus: run.sh failed ($1, round $2)" >&2; exit 1; }
	git -C "$ROOT" checkout -q -- test/bench/summary.svg 2>/dev/null || true
	grep '^BENCH cycle_std_\|^BENCH cycle_fifo_\|^BENCH sqs_http_cycle_\|^BENCH sqs_sql_cycle_\|^BENCH priority_cycle_\|^BENCH rate_cycle_' "$OUT/$1.$2.out" | awk -v b="$1" '{ print b, $2, $3 }' >>"$OUT/all"
}

for r in $(seq 1 "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then run_build old "$r"; run_build new "$r"
	else run_build new "$r"; run_build old "$r"; fi
done
make -C "$ROOT" install >/dev/null 2>&1

echo "== ${VERSUS_LAYOUT:+shared and }dedicated queue, $REV (old) against $(git -C "$ROOT" log --format=%h -1) (new), median of $ROUNDS rounds (msgs/s)"
awk '{ v[$2 " " $1] = v[$2 " " $1] " " $3; names[$2] = 1 }
	function med(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
	END { for (k in names) { o = med(v[k " old"]); n = med(v[k " new"]);
		printf "%-32s old %8.0f  new %8.0f  new/old %.2f\n", k, o, n, (o > 0 ? n / o : 0) } }' "$OUT/all" | sort
echo "(runs kept in $OUT)"
