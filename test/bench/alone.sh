# shellcheck shell=bash
# test/bench/alone.sh - what a section of run.sh run alone needs (sourced by
# its "alone" branch): the settings of run.sh that lib.sh reads, and
# lib.sh's throwaway cluster with the extension created.  The caller sets
# HERE first, and SQS=0 unless it wants the SQS endpoint started.

set -euo pipefail
PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
PKGLIBDIR=$("$PG_CONFIG" --pkglibdir)
BODY=$(head -c 100 /dev/zero | tr '\0' 'x')
QUEUE=bench
BENCH_FLOOR_ONLY=0
BENCH_KEEP=${BENCH_KEEP:-0}
CHECKS_FAILED=${CHECKS_FAILED:-0}
T_START=$(date +%s)
el() { echo "[t+$(( $(date +%s) - T_START ))s]"; }
# shellcheck source=lib.sh
. "$HERE/lib.sh"
start_cluster
psql_init
make_scripts
"${PSQL[@]}" -c 'CREATE EXTENSION queue' >/dev/null
echo "machine:    $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "source:     $(git -C "$HERE" describe --always --dirty 2>/dev/null || echo unknown)"
