# shellcheck shell=bash
# test/bench/bloat.sh - section 11 of run.sh (sourced), or alone on a
# throwaway cluster of its own (lib.sh's), as `make bench` never does:
#
#   PG_CONFIG=... bash test/bench/bloat.sh
#
# A held snapshot (issue 38).  Each system in turn, on a fresh table or
# queue: BLOAT_RATE sends/s offered (pgbench -R, one message a
# transaction, 2 clients), BLOAT_CONSUMERS consumers (bloat_consumer.py)
# receiving up to BLOAT_BATCH and deleting what came as fast as they can
# (a receive that got nothing waits 2 ms), for three phases: BLOAT_CLEAN s
# clean, BLOAT_HELD s with one transaction holding the horizon back (taken
# at the phase's start), BLOAT_AFTER s after it ended.  The holder, each of
# BLOAT_HOLDERS in turn (issue 47: the worker recycles and compacts only
# under a holder without a snapshot): reader, a REPEATABLE READ
# transaction with its snapshot taken (the worker must fall back to plain
# vacuum); writer, a READ COMMITTED transaction idle after taking a
# transaction id; prepared, a prepared transaction.
# Autovacuum and the queue worker at their defaults.
#
# Systems (BLOAT_SYSTEMS): floor (the hand-written SKIP LOCKED queue of
# lib.sh, idx variant: an index on (visible_at, id)), std_shared,
# std_dedicated, fifo_shared, fifo_dedicated (100 groups, a
# deduplication id per message), pgmq (when the pgmq extension is
# installed: pgmq.send / read / delete).
#
# Per phase: consumed/s, the receive's median and p99 (ms, the statement's
# round trip as the consumer sees it), the most dead tuples seen (sampled
# every 5 s, the system's tables with their TOAST), the relations' size at
# the phase's end (MB, pg_total_relation_size) and, where the cost goes:
# index entries read per receive (idx_tup_read / idx_scan of the index the
# receive walks: the visible_at index; FIFO receives walk group rows, so
# "-"), heap blocks touched per received message (heap_blks_hit + read of
# the system's tables, receives and deletes both) and WAL bytes per
# message consumed.  Printed, never asserted: BENCH lines
# bloat_<system>_<phase>_<figure> (the reader) and
# bloat_<system>_<holder>_<phase>_<figure> (the others).

BLOAT_CLEAN=${BLOAT_CLEAN:-60}
BLOAT_HELD=${BLOAT_HELD:-120}
BLOAT_AFTER=${BLOAT_AFTER:-60}
BLOAT_RATE=${BLOAT_RATE:-500}
BLOAT_CONSUMERS=${BLOAT_CONSUMERS:-4}
BLOAT_BATCH=${BLOAT_BATCH:-10}
BLOAT_SYSTEMS=${BLOAT_SYSTEMS:-"floor std_shared std_dedicated fifo_shared fifo_dedicated pgmq"}
BLOAT_HOLDERS=${BLOAT_HOLDERS:-"reader writer prepared"}

# The relations of a system: every table of queue_data and public (each
# system starts on fresh or vacuumed ones, and only its own take rows).
bloat_rels="SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind = 'r' AND n.nspname IN ('queue_data', 'public', 'pgmq')"

# bloat_sample: "<dead tuples> <size bytes> <heap blocks> <wal lsn bytes>
# <size bytes without the deduplication ids>" (a FIFO system's ids live
# their 5-minute window, so that table grows with the sends whatever
# happens to the rest)
bloat_sample() {
	psql_val "SELECT coalesce(sum(s.n_dead_tup), 0),
		coalesce(sum(pg_total_relation_size(s.relid)), 0),
		coalesce(sum(io.heap_blks_hit + io.heap_blks_read), 0),
		pg_current_wal_lsn() - '0/0',
		coalesce(sum(pg_total_relation_size(s.relid))
			FILTER (WHERE s.relname !~ '^(d[0-9]+|dedup_ids)\$'), 0)
	  FROM pg_stat_user_tables s JOIN pg_statio_user_tables io USING (relid)
	 WHERE s.relid IN ($bloat_rels)" | tr '|' ' '
}

# bloat_index_reads INDEX: "<idx_tup_read> <idx_scan>" of one index ("0 0" if none)
bloat_index_reads() {
	[ -n "$1" ] || { echo "0 0"; return; }
	psql_val "SELECT coalesce(sum(idx_tup_read), 0), coalesce(sum(idx_scan), 0)
	  FROM pg_stat_user_indexes WHERE indexrelid = to_regclass('$1')" | tr '|' ' '
}

bloat_reset() {
	local sys=$1
	BLOAT_KIND=queue BLOAT_QUEUE=bloat BLOAT_INDEX="" BLOAT_SEND=""
	psql_run <<EOF
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_floor, bench_handles;
SELECT queue.drop('bloat', if_exists => true);
DO \$\$ BEGIN
	WHILE EXISTS (SELECT FROM queue._reclaim) LOOP
		IF queue._reclaim_step(100000) = 0 THEN PERFORM pg_sleep(0.01); END IF;
	END LOOP;
END \$\$;
EOF
	# (FULL: the tables an earlier system bloated start small, so that
	# each system's sizes are its own)
	"${PSQL[@]}" -c 'VACUUM FULL' >/dev/null
	case $sys in
	floor)
		BLOAT_KIND=floor
		psql_run <<EOF
CREATE TABLE bench_floor (
	id            bigserial PRIMARY KEY,
	visible_at    timestamptz NOT NULL DEFAULT now(),
	body          text NOT NULL,
	receive_count int NOT NULL DEFAULT 0);
CREATE INDEX bench_floor_visible ON bench_floor (visible_at, id);
EOF
		BLOAT_INDEX=bench_floor_visible
		BLOAT_SEND="INSERT INTO bench_floor (body) VALUES (:body);"
		;;
	std_shared | std_dedicated)
		local ded=false
		[ "$sys" = std_dedicated ] && ded=true
		psql_val "SELECT queue.create('bloat', dedicated => $ded)" >/dev/null
		if [ "$ded" = true ]; then
			BLOAT_INDEX="queue_data.q$(psql_val "SELECT queue_id FROM queue._queues WHERE queue_name = 'bloat'")_visible"
		else
			BLOAT_INDEX=queue_data.messages_visible
		fi
		BLOAT_SEND="SELECT queue.send('bloat', :body::text);"
		;;
	fifo_shared | fifo_dedicated)
		local ded=false
		[ "$sys" = fifo_dedicated ] && ded=true
		psql_val "SELECT queue.create('bloat', fifo => true, dedicated => $ded)" >/dev/null
		BLOAT_SEND="\\set g random(1, 100)
\\set i random(1, 1000000000)
SELECT queue.send('bloat', :body::text, message_group_id => 'g' || :g::text,
                  deduplication_id => :client_id::text || '-' || :i::text || '-' || txid_current()::text);"
		;;
	pgmq)
		BLOAT_KIND=pgmq
		psql_run <<EOF
CREATE EXTENSION IF NOT EXISTS pgmq;
SELECT pgmq.drop_queue('bloat') FROM pgmq.list_queues() WHERE queue_name = 'bloat';
SELECT pgmq.create('bloat');
EOF
		BLOAT_INDEX=pgmq.q_bloat_vt_idx
		BLOAT_SEND="SELECT pgmq.send('bloat', jsonb_build_object('b', :body::text));"
		;;
	esac
	printf '%s\n' "$BLOAT_SEND" >"$SCRIPTS/bloat_send.sql"
}

# bloat_stats FILE FROM TO -> "<consumed/s> <median ms> <p99 ms>" of the
# consumers' receives that ended in [FROM, TO)
bloat_stats() {
	awk -v a="$2" -v b="$3" '$1 >= a && $1 < b { print $2, $3 }' "$1" | sort -g |
		awk -v a="$2" -v b="$3" '{ lat[NR] = $1; got += $2 }
		END {
			n = NR
			if (n == 0) { print "0 - -"; exit }
			m = (n % 2) ? lat[(n + 1) / 2] : (lat[n / 2] + lat[n / 2 + 1]) / 2
			k = int(n * 0.99); if (k < n * 0.99) k++; if (k < 1) k = 1
			printf "%.1f %.3f %.3f\n", got / (b - a), m, lat[k]
		}'
}

# bloat_hold HOLDER SECONDS: hold the horizon back that long (in the background)
bloat_hold() {
	case $1 in
	reader)
		"${PSQL[@]}" -c "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM pg_class; SELECT pg_sleep($2); COMMIT;" ;;
	writer)
		# idle in transaction: no statement runs (a running one holds a snapshot)
		{ echo "BEGIN; SELECT pg_catalog.txid_current();"; sleep "$2"; echo "COMMIT;"; } | "${PSQL[@]}" ;;
	prepared)
		"${PSQL[@]}" -c "BEGIN; SELECT pg_catalog.txid_current(); PREPARE TRANSACTION 'bloat_held';" &&
			sleep "$2" && "${PSQL[@]}" -c "COMMIT PREPARED 'bloat_held'" ;;
	esac
}

bloat_system() {
	local sys=$1 hold=${2:-reader} label total t0 t1 t2 t3 holder consumers=() producer c phase from to rem d sent
	local -A dead size heap wal idxr idxs sizeq
	label=$sys
	[ "$hold" = reader ] || label=${sys}_$hold
	bloat_reset "$sys"
	total=$((BLOAT_CLEAN + BLOAT_HELD + BLOAT_AFTER))
	t0=$(date +%s)
	t1=$((t0 + BLOAT_CLEAN))
	t2=$((t1 + BLOAT_HELD))
	t3=$((t2 + BLOAT_AFTER))
	rm -f "$BENCH_DIR"/bloat_c*.log
	"$BINDIR/pgbench" -n -M prepared -c 2 -j 2 -R "$BLOAT_RATE" -T "$total" \
		-h "$BENCH_DIR" -p "$PORT" -U postgres -D body="$BODY" \
		-f "$SCRIPTS/bloat_send.sql" postgres >"$BENCH_DIR/bloat_producer.log" 2>&1 &
	producer=$!
	for c in $(seq 1 "$BLOAT_CONSUMERS"); do
		/usr/bin/python3 -I "$HERE/bloat_consumer.py" "host=$BENCH_DIR port=$PORT user=postgres dbname=postgres" \
			"$BLOAT_KIND" "$BLOAT_QUEUE" "$BLOAT_BATCH" "$t3" >"$BENCH_DIR/bloat_c$c.log" 2>&1 &
		consumers+=($!)
	done
	read -r dead[start] size[start] heap[start] wal[start] sizeq[start] <<<"$(bloat_sample)"
	read -r idxr[start] idxs[start] <<<"$(bloat_index_reads "$BLOAT_INDEX")"
	for phase in clean held after; do
		case $phase in
		clean) to=$t1 ;;
		held)
			to=$t2
			# the holder: taken now, kept until the phase ends
			bloat_hold "$hold" "$BLOAT_HELD" >/dev/null 2>&1 &
			holder=$!
			;;
		after) to=$t3 ;;
		esac
		dead[$phase]=0
		while [ "$(date +%s)" -lt "$to" ]; do
			rem=$((to - $(date +%s)))
			[ "$rem" -gt 5 ] && rem=5
			[ "$rem" -gt 0 ] && sleep "$rem"
			read -r d _ <<<"$(bloat_sample)"
			[ "$d" -gt "${dead[$phase]}" ] && dead[$phase]=$d
		done
		[ "$phase" = held ] && wait "$holder" 2>/dev/null
		read -r _ size[$phase] heap[$phase] wal[$phase] sizeq[$phase] <<<"$(bloat_sample)"
		read -r idxr[$phase] idxs[$phase] <<<"$(bloat_index_reads "$BLOAT_INDEX")"
	done
	wait "$producer" || echo "WARN bloat $label: the producer failed: $(tail -n 3 "$BENCH_DIR/bloat_producer.log")"
	for c in "${consumers[@]}"; do wait "$c" || echo "WARN bloat $label: a consumer failed"; done
	cat "$BENCH_DIR"/bloat_c*.log | grep -E '^[0-9.]+ [0-9.]+ [0-9]+$' >"$BENCH_DIR/bloat_all.log" || true
	{ grep -hvE '^[0-9.]+ [0-9.]+ [0-9]+$' "$BENCH_DIR"/bloat_c*.log || true; } | head -n 3 | sed 's/^/  consumer: /'
	sent=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$BENCH_DIR/bloat_producer.log")
	echo "  $label: offered $BLOAT_RATE/s, sent $(fmt "$(awk -v s="${sent:-0}" -v t="$total" 'BEGIN { print s / t }')")/s over ${total}s"
	printf '  %-7s %10s %9s %9s %11s %9s %10s %10s %9s\n' phase consumed/s "recv p50" "recv p99" "dead max" size_MB "idx/recv" "heap/msg" "WAL/msg"
	local prev=start
	for phase in clean held after; do
		case $phase in clean) from=$t0 to=$t1 ;; held) from=$t1 to=$t2 ;; after) from=$t2 to=$t3 ;; esac
		read -r rate p50 p99 <<<"$(bloat_stats "$BENCH_DIR/bloat_all.log" "$from" "$to")"
		local got ir hb wb
		got=$(awk -v a="$from" -v b="$to" '$1 >= a && $1 < b { g += $3 } END { print g + 0 }' "$BENCH_DIR/bloat_all.log")
		ir=$(awk -v r1="${idxr[$prev]}" -v r2="${idxr[$phase]}" -v s1="${idxs[$prev]}" -v s2="${idxs[$phase]}" \
			-v i="$BLOAT_INDEX" 'BEGIN { if (i == "" || s2 - s1 <= 0) print "-"; else printf "%.1f", (r2 - r1) / (s2 - s1) }')
		hb=$(awk -v a="${heap[$prev]}" -v b="${heap[$phase]}" -v g="$got" 'BEGIN { if (g <= 0) print "-"; else printf "%.1f", (b - a) / g }')
		wb=$(awk -v a="${wal[$prev]}" -v b="${wal[$phase]}" -v g="$got" 'BEGIN { if (g <= 0) print "-"; else printf "%.0f", (b - a) / g }')
		printf '  %-7s %10s %9s %9s %11s %9s %10s %10s %9s\n' "$phase" "$rate" "$p50" "$p99" "${dead[$phase]}" \
			"$(awk -v s="${size[$phase]}" 'BEGIN { printf "%.1f", s / 1048576 }')" "$ir" "$hb" "$wb"
		echo "BENCH bloat_${label}_${phase}_consumed $rate msgs/s"
		echo "BENCH bloat_${label}_${phase}_receive_p50 $p50 ms"
		echo "BENCH bloat_${label}_${phase}_receive_p99 $p99 ms"
		echo "BENCH bloat_${label}_${phase}_dead_max ${dead[$phase]} tuples"
		echo "BENCH bloat_${label}_${phase}_size ${size[$phase]} bytes"
		echo "BENCH bloat_${label}_${phase}_size_without_dedup ${sizeq[$phase]} bytes"
		echo "BENCH bloat_${label}_${phase}_index_reads_per_receive $ir entries"
		echo "BENCH bloat_${label}_${phase}_heap_blocks_per_message $hb blocks"
		echo "BENCH bloat_${label}_${phase}_wal_per_message $wb bytes"
		prev=$phase
	done
	echo "  $label: size growth held/clean $(ratio "${size[held]}" "${size[clean]}")x" \
		"($(ratio "${sizeq[held]}" "${sizeq[clean]}")x without the deduplication ids)," \
		"receive p50 held/clean $(ratio "$(bloat_stats "$BENCH_DIR/bloat_all.log" "$t1" "$t2" | cut -d' ' -f2)" \
			"$(bloat_stats "$BENCH_DIR/bloat_all.log" "$t0" "$t1" | cut -d' ' -f2)")x," \
		"p99 held/clean $(ratio "$(bloat_stats "$BENCH_DIR/bloat_all.log" "$t1" "$t2" | cut -d' ' -f3)" \
			"$(bloat_stats "$BENCH_DIR/bloat_all.log" "$t0" "$t1" | cut -d' ' -f3)")x"
}

bloat_main() {
	local sys hold
	echo "== a held snapshot: receive cost and bloat (test/bench/bloat.sh) $(el)"
	echo "phases: ${BLOAT_CLEAN}s clean, ${BLOAT_HELD}s with the horizon held (holders: $BLOAT_HOLDERS), ${BLOAT_AFTER}s after;" \
		"$BLOAT_RATE sends/s offered, $BLOAT_CONSUMERS consumers, batch $BLOAT_BATCH"
	for sys in $BLOAT_SYSTEMS; do
		if [ "$sys" = pgmq ] && [ -z "$(psql_val "SELECT 1 FROM pg_available_extensions WHERE name = 'pgmq'")" ]; then
			echo "  SKIP pgmq: the pgmq extension is not installed"
			continue
		fi
		for hold in $BLOAT_HOLDERS; do
			bloat_system "$sys" "$hold"
		done
	done
}

if [ -z "${PSQL+x}" ] || [ "${#PSQL[@]}" = 0 ]; then
	HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	SQS=0
	# shellcheck source=alone.sh
	. "$HERE/alone.sh"
fi
bloat_main
