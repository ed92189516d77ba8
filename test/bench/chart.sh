# test/bench/chart.sh - the summary as a chart (sourced by run.sh after
# summary.sh): the full cycle of each shape, msgs/s, the extension beside
# the hand-written queue (floor (a)) and the three-commit limit (floor
# (b)), one group of bars per shape and synchronous_commit setting.  An SVG
# (gnuplot's svg terminal needs no fonts) at BENCH_CHART, by default
# test/bench/summary.svg, the one README shows.  gnuplot comes from Debian
# (gnuplot-nox), installed here when missing and we are root; without it the
# chart is skipped with a note.

BENCH_CHART=${BENCH_CHART:-$HERE/summary.svg}

chart_data() {
	local sync c b sh cv
	for sync in $SYNC_COMMITS; do
		cv=CLIENTS_$sync
		for c in ${!cv:-$CLIENTS}; do for b in $BATCHES; do
			sh="c${c}_b${b}_$sync"
			[ -n "${RES[cycle_std_$sh]:-}" ] || continue
			printf '"c%s b%s %s" %s %s %s\n' "$c" "$b" "$sync" "${RES[cycle_floor_$sh]:-0}" \
				"${RES[floor_b_$sh]:-0}" "${RES[cycle_std_$sh]}"
		done; done
	done
}

if ! command -v gnuplot >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox >/dev/null 2>&1; }
fi
CHART_DATA=$(chart_data)
if [ -z "$CHART_DATA" ]; then
	echo "== chart: no full-cycle figures in this run, no chart"
elif ! command -v gnuplot >/dev/null 2>&1; then
	echo "== chart: gnuplot not found (apt-get install gnuplot-nox), no chart"
else
	printf '%s\n' "$CHART_DATA" >"$BENCH_DIR/chart.dat"
	# floor (b) is not measured in every run (QUICK=1): no bars then
	FLOOR_B_PLOT="'' using 3 title \"floor (b): three commits\" lc rgb '#cfcfcf', "
	awk '$(NF - 1) + 0 > 0 { found = 1 } END { exit !found }' "$BENCH_DIR/chart.dat" || FLOOR_B_PLOT=""
	gnuplot <<GP
set terminal svg size 1000,440 dynamic background rgb 'white'
set output '$BENCH_CHART'
set termoption noenhanced
set title "queue $(psql_val "SELECT extversion FROM pg_extension WHERE extname = 'queue'"): full cycle (send, receive, delete) per shape\nc: clients, b: batch, on/off: synchronous_commit; median of $RUNS runs of ${SECS} s on $(nproc) cores"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key outside top center horizontal
set ylabel "messages per second (log scale)"
set logscale y
set yrange [100:*]
set grid ytics
set xtics nomirror scale 0
plot '$BENCH_DIR/chart.dat' using 2:xtic(1) title "floor (a): hand-written queue" lc rgb '#9e9e9e', \
     $FLOOR_B_PLOT'' using 4 title "queue (this extension)" lc rgb '#1f6fb2'
GP
	echo "== chart: $BENCH_CHART"
fi
