# test/bench/citus.sh - section 10 of run.sh (sourced; CITUS=0 skips it), or
# alone: `bash test/bench/citus.sh` (PG_CONFIG names the PostgreSQL):
# queues on a Citus cluster (docs/citus.md, issue 37).
#
# A coordinator and two workers of its own (shared_preload_libraries =
# 'citus,queue', Unix sockets under the bench folder), set up with
# queue.citus_setup(), and one standard queue (shared storage) placed on a
# worker.  The full cycle (test/bench/std_cycle_b1.sql: send, receive,
# delete, each its own autocommit statement, -M prepared) at CITUS_CLIENTS
# clients for CITUS_SECS seconds, synchronous_commit CITUS_SYNC, three ways
# in one run, interleaved CITUS_RUNS times (median), the queue holding
# 1,000 waiting messages on each node:
#   coordinator  clients connected to the coordinator: every call a hop
#   home         clients connected to the queue's own worker
#   plain        the same queue on the bench's plain node (no Citus)
# Results: BENCH citus_cycle_<way> <msgs/s> msgs/s <ratio to plain>.  The
# three clusters share the machine's cores: the coordinator figure pays for
# the coordinator's and the worker's CPU both.  Printed, never asserted;
# skipped (SKIP line) when Citus is not installed (test/citus_build.sh).

CITUS_CLIENTS=${CITUS_CLIENTS:-4}
CITUS_SECS=${CITUS_SECS:-5}
CITUS_RUNS=${CITUS_RUNS:-3}
CITUS_SYNC=${CITUS_SYNC:-off}

if [ -z "${BENCH_DIR:-}" ]; then
	# alone: the plain node and the helpers of run.sh
	HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	SQS=0
	# shellcheck source=alone.sh
	. "$HERE/alone.sh"
fi

echo "== citus $(el)"
if [ ! -f "$PKGLIBDIR/citus.so" ]; then
	echo "SKIP citus: Citus is not installed in $PKGLIBDIR (test/citus_build.sh builds it)"
else
	CITUS_DIR=$BENCH_DIR/citus
	mkdir -p "$CITUS_DIR"
	[ "$(id -u)" = 0 ] && chown postgres: "$CITUS_DIR"
	CITUS_PORTS=()
	for p in $(seq $((PORT + 200)) $((PORT + 300))); do
		port_free "$p" && CITUS_PORTS+=("$p")
		[ ${#CITUS_PORTS[@]} -eq 3 ] && break
	done
	[ ${#CITUS_PORTS[@]} -eq 3 ] || die "no free ports for the Citus nodes"

	citus_stop() {
		local n
		for n in coord w1 w2; do
			[ -f "$CITUS_DIR/$n/postmaster.pid" ] &&
				as_pg "$BINDIR/pg_ctl" -D "$CITUS_DIR/$n" -m immediate stop >/dev/null 2>&1
		done
		return 0
	}
	trap 'rc=$?; citus_stop; (exit $rc); cleanup' EXIT

	cpsql() {	# PORT SQL
		as_pg "$BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$CITUS_DIR" -p "$1" -U postgres -d postgres -c "$2"
	}
	i=0
	for n in coord w1 w2; do
		p=${CITUS_PORTS[$i]}
		i=$((i + 1))
		as_pg "$BINDIR/initdb" -D "$CITUS_DIR/$n" -A trust -U postgres -E UTF8 --locale=C >"$CITUS_DIR/$n.initdb.log" 2>&1 ||
			die "initdb of the Citus $n failed"
		cat >>"$CITUS_DIR/$n/postgresql.conf" <<EOF
port = $p
listen_addresses = ''
unix_socket_directories = '$CITUS_DIR'
shared_preload_libraries = 'citus,queue'
citus.local_hostname = '$CITUS_DIR'
max_connections = 80
max_prepared_transactions = 20
max_wal_size = 8GB
EOF
		as_pg "$BINDIR/pg_ctl" -D "$CITUS_DIR/$n" -l "$CITUS_DIR/$n.log" -w -t 60 start >/dev/null ||
			die "the Citus $n did not start"
		cpsql "$p" 'CREATE EXTENSION citus'
	done
	CPORT=${CITUS_PORTS[0]}
	cpsql "$CPORT" "SELECT citus_set_coordinator_host('$CITUS_DIR', $CPORT)" >/dev/null
	cpsql "$CPORT" "SELECT citus_add_node('$CITUS_DIR', ${CITUS_PORTS[1]})" >/dev/null
	cpsql "$CPORT" "SELECT citus_add_node('$CITUS_DIR', ${CITUS_PORTS[2]})" >/dev/null
	cpsql "$CPORT" 'CREATE EXTENSION queue'
	cpsql "$CPORT" 'SELECT queue.citus_setup()' >/dev/null
	CQ=citus-bench
	cpsql "$CPORT" "SELECT queue.create('$CQ', dedicated => false)" >/dev/null
	HPORT=$(cpsql "$CPORT" "SELECT node_port FROM queue.citus_placement('$CQ')")
	psql_val "SELECT queue.create('$CQ', dedicated => false)" >/dev/null
	# 1,000 messages waiting, as run.sh's PREFILL, so no receive finds the
	# queue empty
	cpsql "$CPORT" "SELECT count(*) FROM queue.send_batch('$CQ', array_fill('$BODY'::text, ARRAY[1000]))" >/dev/null
	psql_val "SELECT count(*) FROM queue.send_batch('$CQ', array_fill('$BODY'::text, ARRAY[1000]))" >/dev/null
	echo "citus:      $(cpsql "$CPORT" "SELECT citus_version()" | cut -d' ' -f1-2), coordinator :$CPORT," \
		"workers :${CITUS_PORTS[1]} :${CITUS_PORTS[2]}; queue $CQ on :$HPORT"
	echo "shape:      std_cycle_b1, $CITUS_CLIENTS clients, ${CITUS_SECS}s, synchronous_commit $CITUS_SYNC, median of $CITUS_RUNS"

	# citus_cycle HOST PORT -> M (msgs/s: cycles/s, one message each)
	citus_cycle() {
		local out tps
		out=$(PGOPTIONS="-c synchronous_commit=$CITUS_SYNC" as_pg "$BINDIR/pgbench" -n -M prepared \
			-c "$CITUS_CLIENTS" -j "$CITUS_CLIENTS" -T "$CITUS_SECS" -h "$1" -p "$2" -U postgres \
			-D queue="$CQ" -D body="$BODY" -f "$HERE/std_cycle_b1.sql" postgres 2>&1) || {
			echo "$out" >&2
			die "pgbench of the Citus cycle on :$2 failed"
		}
		tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")
		[ -n "$tps" ] || { echo "$out" >&2; die "no tps in pgbench output"; }
		M=$tps
	}
	declare -A CITUS_M=([coordinator]="" [home]="" [plain]="")
	for r in $(seq 1 "$CITUS_RUNS"); do
		citus_cycle "$CITUS_DIR" "$CPORT"
		CITUS_M[coordinator]+=" $M"
		citus_cycle "$CITUS_DIR" "$HPORT"
		CITUS_M[home]+=" $M"
		citus_cycle "$BENCH_DIR" "$PORT"
		CITUS_M[plain]+=" $M"
		echo "run $r: coordinator $(fmt "${CITUS_M[coordinator]##* }")," \
			"home $(fmt "${CITUS_M[home]##* }"), plain $(fmt "${CITUS_M[plain]##* }") msgs/s"
	done
	# every message a cycle sent was deleted, wherever it went: the 1,000
	# waiting from the start are left on each node
	left=$(cpsql "$HPORT" "SELECT count(*) FROM queue.peek('$CQ', 5000)")/$(psql_val "SELECT count(*) FROM queue.peek('$CQ', 5000)")
	check "citus: messages left after the cycles (queue's node/plain node)" "$left" 1000/1000
	plain=$(median <<<"${CITUS_M[plain]}")
	result citus_cycle_plain "$plain" msgs/s 0 self "(one plain node, the same queue)"
	result citus_cycle_home "$(median <<<"${CITUS_M[home]}")" msgs/s 0 "$plain" "(clients on the queue's node)"
	result citus_cycle_coordinator "$(median <<<"${CITUS_M[coordinator]}")" msgs/s 0 "$plain" "(through the coordinator: a hop per call)"
	citus_stop
fi
