# test/bench/summary.sh - the summary tables and the issue's targets, from
# RES (sourced by run.sh at the end).

v() { fmt "${RES[$1]:-}" "${2:-0}"; }
r() { ratio "${RES[$1]:-}" "${RES[$2]:-}"; }

echo "== summary (msgs/s; median of $RUNS runs; ratios: the extension / floor (a) of the same shape)"
for sync in $SYNC_COMMITS; do
	echo "-- full cycle, synchronous_commit $sync"
	printf '%-9s %10s %10s %10s %10s %7s %10s %7s\n' shape floor_pk floor_idx "floor(a)" std std/a "floor(b)" std/b
	cv=CLIENTS_$sync
	for c in ${!cv:-$CLIENTS}; do for b in $BATCHES; do
		sh="c${c}_b${b}_$sync"
		printf '%-9s %10s %10s %10s %10s %7s %10s %7s\n' "c${c}_b$b" "$(v "cycle_floor_pk_$sh")" \
			"$(v "cycle_floor_idx_$sh")" "$(v "cycle_floor_$sh")" "$(v "cycle_std_$sh")" \
			"$(r "cycle_std_$sh" "cycle_floor_$sh")" "$(v "floor_b_$sh")" "$(r "cycle_std_$sh" "floor_b_$sh")"
	done; done
	if [ -n "$OP_CLIENTS" ] && [ -n "$OP_BATCHES" ]; then
		echo "-- single operations, synchronous_commit $sync (floor(a): the better variant; update: floor (b) only)"
		printf '%-9s %-13s %10s %10s %7s\n' shape op "floor(a)" ext ext/a
		bv=OP_BATCHES_$sync
		for c in $OP_CLIENTS; do for b in ${!bv:-$OP_BATCHES}; do
			sh="c${c}_b${b}_$sync"
			for op in insert receive delete update; do
				have_op "$op" || continue
				case $op in
				insert) e=send; [ "$b" -gt 1 ] && e=send_batch; name=$e ;;
				receive) e=receive; name=receive ;;
				delete) e=delete; [ "$b" -gt 1 ] && e=delete_batch; name=$e ;;
				update) e=""; name="update (b)" ;;
				esac
				printf '%-9s %-13s %10s %10s %7s\n' "c${c}_b$b" "$name" "$(v "${op}_floor_$sh")" \
					"$( [ -n "$e" ] && v "${e}_$sh" || echo -)" "$( [ -n "$e" ] && r "${e}_$sh" "${op}_floor_$sh" || echo -)"
			done
		done; done
	fi
	if [ "$EXT" = 1 ] && [ -n "$FIFO_SHAPES" ] && [[ " $FIFO_SYNCS " == *" $sync "* ]]; then
		echo "-- FIFO and deduplication ids, full cycle, synchronous_commit $sync (ratio: / the standard queue)"
		printf '%-9s %-12s %10s %8s %8s\n' shape queue msgs/s "/std" "/floor(a)"
		for fs in $FIFO_SHAPES; do
			c=${fs%%_*}; c=${c#c}; b=${fs##*_b}
			sh="c${c}_b${b}_$sync"
			# FIFO rows: ratio to the standard queue of their own runs
			for q in std std_dedup std_with_fifo $(for g in $FIFO_GROUPS; do echo "fifo_g$g"; done); do
				den=cycle_std_$sh
				[[ $q == fifo_* ]] && den=cycle_std_with_fifo_$sh
				printf '%-9s %-13s %10s %8s %8s\n' "c${c}_b$b" "$q" "$(v "cycle_${q}_$sh")" \
					"$(r "cycle_${q}_$sh" "$den")" "$(r "cycle_${q}_$sh" "cycle_floor_$sh")"
			done
		done
	fi
done
if [ -n "${RES[longpoll_50q_median]:-}${RES[longpoll_1q_median]:-}" ]; then
	echo "-- long polling (ms, commit to return)"
	printf '%-22s %8s %8s\n' receivers median p99
	printf '%-22s %8s %8s\n' "50 on 50 queues" "$(v longpoll_50q_median 3)" "$(v longpoll_50q_p99 3)"
	printf '%-22s %8s %8s\n' "10 on 1 queue" "$(v longpoll_1q_median 3)" "$(v longpoll_1q_p99 3)"
fi
if [ -n "${RES[receive_ms_floor_1k]:-}" ]; then
	echo "-- scale: receive latency (ms) in the full cycle, 1 client, batch $SCALE_BATCH, synchronous_commit $SCALE_SYNC"
	printf '%-10s %10s %10s %10s %10s %14s\n' queue 1k 1m inflight 1m/1k inflight/none
	for k in floor std; do
		[ -n "${RES[receive_ms_${k}_1k]:-}" ] || continue
		printf '%-10s %10s %10s %10s %10s %14s\n' "$k" "$(v "receive_ms_${k}_1k" 3)" "$(v "receive_ms_${k}_1m" 3)" \
			"$(v "receive_ms_${k}_inflight" 3)" "$(v "receive_scale_${k}_1m_vs_1k" 2)" "$(v "receive_scale_${k}_inflight_vs_none" 2)"
	done
fi
if [ -n "${RES[soak_floor_rate]:-}" ]; then
	echo "-- soak: $SOAK_MESSAGES messages, 4 clients, batch 10"
	printf '%-10s %10s %16s %10s\n' queue msgs/s slowest/fastest MB
	for k in floor std; do
		[ -n "${RES[soak_${k}_rate]:-}" ] || continue
		printf '%-10s %10s %16s %10s\n' "$k" "$(v "soak_${k}_rate")" "$(v "soak_${k}_window_ratio" 2)" "$(v "soak_${k}_size" 1)"
	done
fi

# target LABEL VALUE OP LIMIT: one line of the targets, ok or MISS ("-" when
# not measured in this run).
target() {
	local verdict
	verdict=$(awk -v x="$2" -v op="$3" -v t="$4" 'BEGIN {
		if (x == "-" || x == "") { print "not measured"; exit }
		ok = (op == ">=") ? (x + 0 >= t + 0) : (x + 0 <= t + 0); print (ok ? "ok" : "MISS") }')
	printf '%-52s %8s %s %-5s %s\n' "$1" "$(fmt "$2" 2)" "$3" "$4" "$verdict"
}
if [ "$EXT" = 1 ]; then
	echo "== targets (issue 6; ratios within this run)"
	for sync in $SYNC_COMMITS; do
		for b in 1 10; do
			sh="c8_b${b}_$sync"
			target "std cycle $sh / floor (a)" "$(r "cycle_std_$sh" "cycle_floor_$sh")" ">=" 1.0
			target "std cycle $sh / floor (b)" "$(r "cycle_std_$sh" "floor_b_$sh")" ">=" 0.7
		done
		target "send_batch c8_b100_$sync / multi-row INSERT" "$(r "send_batch_c8_b100_$sync" "insert_floor_c8_b100_$sync")" ">=" 0.9
		[[ " $FIFO_SYNCS " == *" $sync "* ]] || continue
		for fs in $FIFO_SHAPES; do
			for g in $FIFO_GROUPS; do
				[ "$g" -ge 100 ] || continue
				target "fifo $g groups cycle ${fs}_$sync / std" "$(r "cycle_fifo_g${g}_${fs}_$sync" "cycle_std_with_fifo_${fs}_$sync")" ">=" 0.7
			done
		done
	done
	for tag in 50q 1q; do
		target "long-poll wake-up $tag median (ms)" "${RES[longpoll_${tag}_median]:--}" "<=" 0.5
		target "long-poll wake-up $tag p99 (ms)" "${RES[longpoll_${tag}_p99]:--}" "<=" 2
	done
	target "receive at $SCALE_MESSAGES waiting / at $PREFILL" "${RES[receive_scale_std_1m_vs_1k]:--}" "<=" 1.2
	target "receive behind $SCALE_INFLIGHT in flight / none" "${RES[receive_scale_std_inflight_vs_none]:--}" "<=" 1.2
	target "fifo receive at $SCALE_MESSAGES waiting / at $PREFILL" "${RES[receive_scale_fifo_1m_vs_1k]:--}" "<=" 1.2
	target "topic publish, 1 queue / send" "$(r topic_publish_1q topic_send_1q)" ">=" 0.8
	target "topic publish ${TOPIC_BIG_BYTES:-10240} B to ${TOPIC_FANOUT:-10} queues / send" "$(r topic_publish_big topic_send_big)" ">=" 0.3
	target "topic bytes stored per publish / per send" "$(r topic_big_bytes_per_publish topic_big_bytes_per_send)" "<=" 2
	target "topic publish, ${TOPIC_MANY_SUBS:-1000} subscriptions (1 matching) / 1 subscription" "$(r topic_publish_1sub topic_publish_many_subs)" "<=" 3
	target "consumer push latency median (ms)" "${RES[consumer_latency_median]:--}" "<=" 1
	target "consumer push latency p99 (ms)" "${RES[consumer_latency_p99]:--}" "<=" 5
	target "consumer drain (batch 10, concurrency 2) / std cycle c2 b10" "$(r consumer_drain_b10_c2 consumer_cycle_c2_b10)" ">=" 0.8
	target "many queues: cycle over ${MANYQ_TOUCH:-1000} queues / 1 queue" "$(r manyq_cycle_spread manyq_cycle_1q)" ">=" 0.8
	target "many queues: idle worker, ${MANYQ_QUEUES:-10000} queues (% of a core)" "${RES[manyq_idle_worker_cpu]:--}" "<=" 1
	target "fair: dwell p99 of quiet tenants beside a noisy backlog / alone" "$(r fair_dwell_p99_noisy fair_dwell_p99_alone)" "<=" 2
	target "fair: cycle b1, ${FAIR_TENANTS:-1000} tenants / no group ids" "$(r fair_cycle_t${FAIR_TENANTS:-1000}_b1_${FAIR_SYNC:-off} fair_cycle_plain_b1_${FAIR_SYNC:-off})" ">=" 0.7
	target "fair: cycle b10, ${FAIR_TENANTS:-1000} tenants / no group ids" "$(r fair_cycle_t${FAIR_TENANTS:-1000}_b10_${FAIR_SYNC:-off} fair_cycle_plain_b10_${FAIR_SYNC:-off})" ">=" 0.7
	target "fair: most in flight seen / max_in_flight_per_group" "$(ratio "${RES[fair_cap_max_in_flight_seen]:--}" "${FAIR_CAP:-5}")" "<=" 1
	target "soak: slowest / fastest 5 s window" "${RES[soak_std_window_ratio]:--}" ">=" 0.5
	target "soak: size at the end / the floor's" "$(r soak_std_size soak_floor_size)" "<=" 0.25
fi
if [ "$CHECKS_FAILED" != 0 ]; then
	echo "WARN $CHECKS_FAILED run(s) failed their checks (see WARN lines above): their figures are suspect"
fi
