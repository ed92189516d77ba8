#!/usr/bin/env bash
# make test-versions: the whole suite (make test) on each PostgreSQL major,
# one after the other, then a line per major with its "N passed, M failed".
#
#   15      Debian bookworm's own packages, as CI runs it
#   16      a tree QUEUE_PG16_SRC names (postgres/postgres at a REL_16_*
#           tag; no Debian suite here carries 16), built by test/build_pg.sh;
#           skipped with a note without it
#   17-19   Debian's own packages in a chroot (test/debian_pg.sh): trixie's
#           17, sid's 18, experimental's 19 beta
#
# QUEUE_MAJORS="17 19" picks majors.  Each major's whole output goes to
# .test-versions/<major>.log (git-ignored).  Exit status 0 when every major
# that ran passed.  About 15 minutes a major on two cores, more the first
# time (a chroot, or a PostgreSQL build).
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1
OUT=$REPO/.test-versions
mkdir -p "$OUT"
rc=0
summary=()
for m in ${QUEUE_MAJORS:-15 16 17 18 19}; do
	log=$OUT/$m.log
	echo "=== PostgreSQL $m (log: $log)"
	case $m in
	15) make test >"$log" 2>&1 ;;
	16)
		if [ -z "${QUEUE_PG16_SRC:-}" ]; then
			summary+=("16: skipped (set QUEUE_PG16_SRC to a PostgreSQL 16 source tree)")
			continue
		fi
		{ QUEUE_PG_SRC=$QUEUE_PG16_SRC bash test/build_pg.sh 16 &&
			make test PG_CONFIG="${QUEUE_PG_CACHE:-/var/cache/queue-pg}/16/bin/pg_config"; } >"$log" 2>&1
		;;
	17 | 18 | 19) bash test/debian_pg.sh "$m" >"$log" 2>&1 ;;
	*)
		summary+=("$m: not a major this knows")
		continue
		;;
	esac
	status=$?
	[ "$status" -eq 0 ] || rc=1
	summary+=("$m: $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1) (exit $status)")
	echo "${summary[-1]}"
done
echo
printf '%s\n' "${summary[@]}"
exit $rc
