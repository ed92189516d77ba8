#!/usr/bin/env bash
# test/run_tests.sh: run every test suite of the extension on fresh
# temporary clusters (`make test` runs this after `make install`).
#
#   regress    test/sql/*.sql    pg_regress            expected/<name>.out
#   isolation  test/specs/*.spec pg_isolation_regress  expected/<name>.out
#   TAP        test/t/*.pl       prove + PostgreSQL::Test::Cluster
#   examples   examples/*/       examples/run.sh on one temporary cluster
#
# initdb and postgres refuse to run as root, and the repository may sit where
# the postgres user cannot read it (/root/...), so the suites' inputs are
# copied to a fresh directory under /tmp and run there, as user postgres when
# we are root, else as ourselves.  Outputs (results/, regression.diffs, server
# and TAP logs) are copied back to .test/ in the repository, and the diffs to
# ./regression.diffs, which are also printed: CI reads stdout.
#
# The last line is always "N passed, M failed" (one count per regress test,
# per isolation spec, per TAP file and per example program, and one for the
# fuzz runs `make test` made first, given as QUEUE_FUZZ_RC and
# QUEUE_SQS_FUZZ_RC).  Exit status is
# non-zero if anything failed or if no test ran.  QUEUE_TEST_KEEP=1 keeps the work directory.
# QUEUE_TESTS="name ..." runs only the tests of those names (a regress test,
# an isolation spec, a TAP file without .pl, or an example program as
# python_consumer, node_fifo_consumer, ...; "examples" names them all), for a
# quick run while working.

set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}

die() {
	echo "run_tests: $*" >&2
	echo "0 passed, 1 failed"
	exit 1
}

BINDIR=$("$PG_CONFIG" --bindir 2>/dev/null) || die "$PG_CONFIG not found (run test/setup.sh)"
PGXS_MK=$("$PG_CONFIG" --pgxs 2>/dev/null) || die "$PG_CONFIG --pgxs failed"
PGXS_SRC=$(cd "$(dirname "$PGXS_MK")/.." 2>/dev/null && pwd) || die "no PGXS at $PGXS_MK (run test/setup.sh)"
PG_REGRESS=$PGXS_SRC/test/regress/pg_regress
PG_ISOLATION_REGRESS=$PGXS_SRC/test/isolation/pg_isolation_regress
TAP_LIB=$PGXS_SRC/test/perl
for f in "$PG_REGRESS" "$PG_ISOLATION_REGRESS" "$BINDIR/initdb" "$BINDIR/postgres"; do
	[ -x "$f" ] || die "missing $f (run test/setup.sh)"
done

# Nothing from the caller's environment may point the tests at another server.
unset PGHOST PGHOSTADDR PGPORT PGDATABASE PGUSER PGPASSWORD PGSERVICE \
	PGOPTIONS PGDATA PGSSLMODE PGAPPNAME TEMP_CONFIG LC_ALL LANGUAGE
if locale -a 2>/dev/null | grep -qix 'c\.utf-\?8'; then
	export LANG=C.UTF-8
else
	export LANG=C
fi

# Who runs the servers.
if [ "$(id -u)" -eq 0 ]; then
	id -u postgres >/dev/null 2>&1 || die "no OS user postgres (run test/setup.sh)"
	RUN_USER=postgres
else
	RUN_USER=$(id -un)
fi
as_run() {
	if [ "$RUN_USER" = "$(id -un)" ]; then
		"$@"
	else
		runuser -u "$RUN_USER" -- "$@"
	fi
}

# A fresh work directory with copies of what the suites read.  Expected
# files go to test/expected: pg_regress looks in <outputdir>/expected and
# then <inputdir>/expected, and each suite gets its own output directory.
W=$(mktemp -d /tmp/queue-test.XXXXXX) || die "mktemp failed"
# shellcheck disable=SC2317  # invoked from the EXIT trap
cleanup() {
	# Stop a temp instance left running by an interrupted pg_regress.
	local pid
	for pid in "$W"/tmp/*/data/postmaster.pid; do
		[ -f "$pid" ] && as_run "$BINDIR/pg_ctl" -D "$(dirname "$pid")" -m immediate stop >/dev/null 2>&1
	done
	if [ "${QUEUE_TEST_KEEP:-0}" = 1 ]; then
		echo "run_tests: work directory kept: $W" >&2
	else
		rm -rf "$W"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cp -a "$REPO/test" "$W/test"
# The example programs (with examples/node/node_modules, if installed) and
# the exporter's queries file (examples/prometheus), which 017_exporter
# reads from $TESTDIR.
[ -d "$REPO/examples" ] && cp -a "$REPO/examples" "$W/examples"
# README.md and docs/, whose sql blocks 021_readme_sql and 033_docs_sql run
# as written.
cp -a "$REPO/README.md" "$W/README.md"
[ -d "$REPO/docs" ] && cp -a "$REPO/docs" "$W/docs"
# queue.control and sql/'s file names, which 021_readme_sql holds README's
# version and docs/operations.md's upgrade list to
cp -a "$REPO/queue.control" "$W/queue.control"
# and META.json, which 021 holds to the control file's version and to
# PGXN's spec (test/release_meta.py)
[ -f "$REPO/META.json" ] && cp -a "$REPO/META.json" "$W/META.json"
mkdir -p "$W/sql" && cp -a "$REPO"/sql/queue--*.sql "$W/sql/"
rm -rf "$W/test/expected"
mkdir -p "$W/test/expected" "$W/out/regress" "$W/out/isolation" "$W/tmp" "$W/tmp_check" "$W/logs"
[ -d "$REPO/expected" ] && cp -a "$REPO/expected/." "$W/test/expected/"
if [ "$RUN_USER" != "$(id -un)" ]; then
	chown -R "$RUN_USER:$(id -gn "$RUN_USER")" "$W"
fi
chmod 755 "$W"
cd "$W" || die "cannot enter $W"
rm -f "$REPO/regression.diffs"

PASSED=0
FAILED=0

# only_wanted: filter a list of test names (or paths) by QUEUE_TESTS.
only_wanted() {
	local line base
	while read -r line; do
		base=$(basename "$line" .pl)
		if [ -z "${QUEUE_TESTS:-}" ] || [[ " $QUEUE_TESTS " == *" $base "* ]]; then
			echo "$line"
		fi
	done
}
FAILED_NAMES=()

# count_pg_regress LOG SUITE RC N: count one pg_regress run's per-test
# results from its output.  PG15 prints "test NAME ... ok|FAILED|failed
# (ignored)" (or "     NAME ... " inside a parallel group); PG16+ prints TAP
# lines "ok 1 - NAME" / "not ok 1 - NAME".  Tests that never reported
# (pg_regress died, or could not set up its instance) count as failed.
count_pg_regress() {
	local log=$1 suite=$2 rc=$3 n=$4 p=0 f=0 name status
	while read -r status name; do
		if [ "$status" = ok ]; then
			p=$((p + 1))
		else
			f=$((f + 1))
			FAILED_NAMES+=("$suite/$name")
		fi
	done < <(sed -n -E \
		-e 's/^(test +)?([^ ]+) +\.\.\. +(ok|failed \(ignored\))( .*)?$/ok \2/p' \
		-e 's/^(test +)?([^ ]+) +\.\.\. +FAILED( .*)?$/FAILED \2/p' \
		-e 's/^ok +[0-9]+ +[-+] +([^ ]+).*$/ok \1/p' \
		-e 's/^not ok +[0-9]+ +[-+] +([^ ]+).*$/FAILED \1/p' \
		"$log")
	if [ $((p + f)) -lt "$n" ]; then
		FAILED_NAMES+=("$suite: $((n - p - f)) test(s) did not run")
		f=$((n - p))
	elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		FAILED_NAMES+=("$suite: exited with status $rc")
		f=1
	fi
	PASSED=$((PASSED + p))
	FAILED=$((FAILED + f))
	return $((f > 0))
}

# show_failure SUITE: print what CI needs to see when a pg_regress suite
# fails: the diffs, and the server log when the server crashed or the suite
# could not start (pg_regress keeps it in <outputdir>/log).
show_failure() {
	local suite=$1 log
	if [ -s "out/$suite/regression.diffs" ]; then
		echo "=== $suite: regression.diffs ==="
		cat "out/$suite/regression.diffs"
		cat "out/$suite/regression.diffs" >>"$REPO/regression.diffs"
	fi
	log=out/$suite/log/postmaster.log
	if [ ! -s "out/$suite/regression.diffs" ] ||
		grep -qE 'terminated by signal|PANIC|TRAP:' "$log" 2>/dev/null; then
		for log in "out/$suite/log/initdb.log" "$log"; do
			case $log in *initdb.log) [ -s "out/$suite/regression.diffs" ] && continue ;; esac
			if [ -s "$log" ]; then
				echo "=== $suite: tail of $log ==="
				tail -n 80 "$log"
			fi
		done
	fi
}

# run_pg_regress SUITE PROGRAM INPUT_SUBDIR EXT [CONFIG]: run every
# test/<subdir>/*.<ext> in one temporary instance, set up with test/queue.conf
# and CONFIG's lines after it.
run_pg_regress() {
	local suite=$1 prog=$2 sub=$3 ext=$4 extra=${5:-} rc
	local tests=()
	mapfile -t tests < <(cd "test/$sub" 2>/dev/null && ls -1 -- *."$ext" 2>/dev/null |
		LC_ALL=C sort | sed "s/\\.$ext\$//" | only_wanted)
	if [ ${#tests[@]} -eq 0 ]; then
		echo "=== $suite: no test/$sub/*.$ext, skipped ==="
		return 0
	fi
	echo "=== $suite: ${#tests[@]} test(s) ==="
	# A test without an expected file would stop pg_regress before the rest
	# ran: compare it against an empty file instead, so it fails alone and its
	# output lands in .test/<suite>/results/ ready to review and copy.
	local t
	for t in "${tests[@]}"; do
		if [ ! -e "test/expected/$t.out" ]; then
			echo "=== $suite: no expected/$t.out, comparing with an empty file ==="
			as_run touch "test/expected/$t.out"
		fi
	done
	as_run sh -c "cat test/queue.conf >'tmp/$suite.conf' && printf '%s\n' '$extra' >>'tmp/$suite.conf'"
	as_run mkdir -p "out/$suite"
	as_run "$prog" \
		--inputdir=test \
		--outputdir="out/$suite" \
		--temp-instance="tmp/$suite" \
		--temp-config="tmp/$suite.conf" \
		--load-extension=queue \
		--bindir="$BINDIR" \
		--encoding=UTF8 --no-locale \
		"${tests[@]}" 2>&1 | tee "logs/$suite.log"
	rc=${PIPESTATUS[0]}
	count_pg_regress "logs/$suite.log" "$suite" "$rc" "${#tests[@]}" || show_failure "$suite"
}

# free_port START: the first port from START down that nothing listens on.
free_port() {
	local p=$1
	while [ "$p" -gt 1024 ]; do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null &&
			[ ! -e "/tmp/.s.PGSQL.$p" ]; then
			echo "$p"
			return
		fi
		p=$((p - 1))
	done
	echo 65432
}

# run_tap: each test/t/*.pl through prove, with the environment PGXS's
# prove_installcheck sets, one prove per file so each file counts once.
run_tap() {
	local tests=() t name rc port log
	mapfile -t tests < <(ls -1 test/t/*.pl 2>/dev/null | LC_ALL=C sort | only_wanted)
	if [ ${#tests[@]} -eq 0 ]; then
		echo "=== tap: no test/t/*.pl, skipped ==="
		return 0
	fi
	if ! command -v prove >/dev/null 2>&1; then
		echo "=== tap: prove not found (run test/setup.sh) ==="
		FAILED=$((FAILED + ${#tests[@]}))
		FAILED_NAMES+=("tap: prove not found")
		return
	fi
	echo "=== tap: ${#tests[@]} test file(s) ==="
	port=$(free_port 65432)
	as_run sh -c "echo 'queue.default_storage = dedicated' >'$W/tmp/tap.conf'"
	# PROVE_FLAGS (e.g. --verbose), as PGXS reads it.
	local prove_flags=()
	read -r -a prove_flags <<<"${PROVE_FLAGS:-}"
	for t in "${tests[@]}"; do
		name=$(basename "$t" .pl)
		# The TAP files drive the worker over the dedicated layout's tables;
		# regress and isolation run both layouts.
		as_run env TESTDIR="$W" PATH="$BINDIR:$W:$PATH" PGPORT="$port" \
			TEMP_CONFIG="$W/tmp/tap.conf" \
			PG_REGRESS="$PG_REGRESS" \
			prove -I "$TAP_LIB" -I "$W" "${prove_flags[@]}" "$t" 2>&1 | tee -a logs/tap.log
		rc=${PIPESTATUS[0]}
		if [ "$rc" -eq 0 ]; then
			PASSED=$((PASSED + 1))
		else
			FAILED=$((FAILED + 1))
			FAILED_NAMES+=("tap/$name")
			# tmp_check/log up to 16; from 17 the TAP modules write to log/
			for log in {tmp_check/log,log}/"regress_log_$name" {tmp_check/log,log}/"${name}"_*.log; do
				if [ -s "$log" ]; then
					echo "=== tap: tail of $log ==="
					tail -n 60 "$log"
				fi
			done
		fi
	done
}

# run_examples: every program of examples/ (examples/run.sh --list) against
# one temporary cluster started as the TAP tests start theirs: initdb and
# pg_ctl as $RUN_USER, test/queue.conf (the extension preloaded), Unix
# socket only, a database "examples" with the extension.  Each program
# counts once; a missing interpreter or driver fails its programs.
run_examples() {
	local tests=() dir port rc name status
	[ -f examples/run.sh ] || return 0
	if [[ " ${QUEUE_TESTS:-} " == *" examples "* ]]; then
		mapfile -t tests < <(bash examples/run.sh --list)
	else
		mapfile -t tests < <(bash examples/run.sh --list | only_wanted)
	fi
	if [ ${#tests[@]} -eq 0 ]; then
		echo "=== examples: no example selected, skipped ==="
		return 0
	fi
	echo "=== examples: ${#tests[@]} program(s) ==="
	dir=$W/tmp/examples
	port=$(free_port 65400)
	as_run mkdir -p "$dir"
	if ! as_run "$BINDIR/initdb" -D "$dir/data" --auth=trust --no-locale -E UTF8 \
		>logs/examples_initdb.log 2>&1 ||
		! as_run sh -c "cat test/queue.conf >>'$dir/data/postgresql.conf' &&
			printf '%s\n' \"listen_addresses = ''\" \"unix_socket_directories = '$dir'\" \
				'port = $port' >>'$dir/data/postgresql.conf'" ||
		! as_run "$BINDIR/pg_ctl" -D "$dir/data" -l logs/examples_server.log -w start >/dev/null ||
		! as_run "$BINDIR/psql" -X -q -h "$dir" -p "$port" -d postgres -v ON_ERROR_STOP=1 \
			-c 'CREATE DATABASE examples' >>logs/examples_initdb.log 2>&1 ||
		! as_run "$BINDIR/psql" -X -q -h "$dir" -p "$port" -d examples -v ON_ERROR_STOP=1 \
			-c 'CREATE EXTENSION queue' >>logs/examples_initdb.log 2>&1; then
		echo "=== examples: could not start the cluster ==="
		tail -n 40 logs/examples_initdb.log logs/examples_server.log 2>/dev/null
		FAILED=$((FAILED + ${#tests[@]}))
		FAILED_NAMES+=("examples: no cluster")
		return
	fi
	as_run env PGHOST="$dir" PGPORT="$port" PGDATABASE=examples PGUSER="$RUN_USER" \
		bash examples/run.sh "${tests[@]}" 2>&1 | tee logs/examples.log
	as_run "$BINDIR/pg_ctl" -D "$dir/data" -m fast stop >/dev/null 2>&1
	local p=0 f=0
	while read -r status name _; do
		case $status in
		ok) p=$((p + 1)) ;;
		FAILED) f=$((f + 1)) FAILED_NAMES+=("examples/$name") ;;
		esac
	done < <(grep -E "^(ok|FAILED) " logs/examples.log)
	if [ $((p + f)) -lt ${#tests[@]} ]; then
		FAILED_NAMES+=("examples: $((${#tests[@]} - p - f)) program(s) did not run")
		f=$((${#tests[@]} - p))
	fi
	PASSED=$((PASSED + p))
	FAILED=$((FAILED + f))
}

# Every regress test and isolation spec runs in both storage layouts
# (DESIGN.md "Storage"): shared, the default, then dedicated.
run_pg_regress regress "$PG_REGRESS" sql sql
run_pg_regress isolation "$PG_ISOLATION_REGRESS" specs spec
run_pg_regress regress-dedicated "$PG_REGRESS" sql sql "queue.default_storage = dedicated"
run_pg_regress isolation-dedicated "$PG_ISOLATION_REGRESS" specs spec "queue.default_storage = dedicated"
run_tap
run_examples

# The fuzz run that `make test` made before us (test/fuzz/run.sh) counts as
# one test here, so the last line counts every part that ran.
if [ -n "${QUEUE_FUZZ_RC:-}" ]; then
	if [ "$QUEUE_FUZZ_RC" = 0 ]; then
		PASSED=$((PASSED + 1))
	else
		FAILED=$((FAILED + 1))
		FAILED_NAMES+=("fuzz (exit $QUEUE_FUZZ_RC; its output is above)")
	fi
fi
if [ -n "${QUEUE_SQS_FUZZ_RC:-}" ]; then
	if [ "$QUEUE_SQS_FUZZ_RC" = 0 ]; then
		PASSED=$((PASSED + 1))
	else
		FAILED=$((FAILED + 1))
		FAILED_NAMES+=("sqs fuzz (exit $QUEUE_SQS_FUZZ_RC; its output is above)")
	fi
fi

# Keep the outputs in the repository (git-ignored), owned like the repository.
rm -rf "$REPO/.test"
mkdir -p "$REPO/.test"
cp -a out/regress out/isolation out/regress-dedicated out/isolation-dedicated logs "$REPO/.test/" 2>/dev/null
# (tmp_check/log up to 16; from 17 the TAP modules write to log/)
if [ -d tmp_check/log ]; then
	cp -a tmp_check/log "$REPO/.test/tap"
elif [ -d log ]; then
	cp -a log "$REPO/.test/tap"
fi
chown -R "$(stat -c %u:%g "$REPO")" "$REPO/.test" 2>/dev/null
[ -f "$REPO/regression.diffs" ] && chown "$(stat -c %u:%g "$REPO")" "$REPO/regression.diffs" 2>/dev/null

echo
if [ ${#FAILED_NAMES[@]} -gt 0 ]; then
	echo "failed: ${FAILED_NAMES[*]}"
	[ -f "$REPO/regression.diffs" ] && echo "diffs: $REPO/regression.diffs"
	# What failed, last (a CI log is often read from its end): each failed
	# TAP file's "not ok" lines and its diagnostics, 12 lines at most each.
	for name in "${FAILED_NAMES[@]}"; do
		[[ "$name" == tap/* ]] || continue
		for log in "$REPO/.test/tap/regress_log_${name#tap/}"; do
			[ -s "$log" ] || continue
			echo "--- $name:"
			grep -E '^(not ok|# )' "$log" | grep -vE '^# (Running:|Checking port|Found port|Postmaster PID|No postmaster PID|Looks like)' | tail -n 12
		done
	done
	echo "outputs: $REPO/.test/"
fi
echo "$PASSED passed, $FAILED failed"
if [ "$FAILED" -eq 0 ] && [ "$PASSED" -gt 0 ]; then
	exit 0
fi
exit 1
