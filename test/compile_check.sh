#!/usr/bin/env bash
# test/compile_check.sh: compile every C file of the extension and of the
# SQS endpoint's library against another PostgreSQL major's headers, with
# the flags that major's PGXS would use and -Werror, without building that
# PostgreSQL: its Debian source package is configured and its generated
# headers made (test/build_pg.sh NN --headers), nothing more.
#
#   bash test/compile_check.sh [MAJOR]      # default 18, the newest; as root
#
# .ci/run runs it on every run, after `make test` (which builds against
# Debian's 15 and installs libmicrohttpd's and libcurl's headers): a PostgreSQL API change that breaks the newest major
# cannot land unseen, as 1.9's vacuum.c did.  About two minutes on a fresh
# machine (the source package, configure, the headers); seconds after.
# A source package that cannot be fetched (the mirror down or without it)
# is a warning and exit 0: it says nothing of our code; a file that does
# not compile is an error and exit 1.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MAJOR=${1:-18}

if ! INC=$(bash "$REPO/test/build_pg.sh" "$MAJOR" --headers | tail -n 1) || [ ! -d "$INC" ]; then
	echo "compile_check: WARNING: PostgreSQL $MAJOR's headers could not be made (see the lines above); not checked"
	exit 0
fi
SRC=$(cd "$INC/../.." && pwd)
GLOBAL=$SRC/src/Makefile.global
# The flags PGXS would pass (configure's CFLAGS, CPPFLAGS and the module
# flags), then ours (Makefile and src/sqs/Makefile, CI=true's -Werror).
read -r -a PG_FLAGS <<<"$(sed -n 's/^CFLAGS = //p; s/^CFLAGS_SL = //p; s/^CFLAGS_SL_MODULE = //p' "$GLOBAL" | tr '\n' ' ')"
read -r -a PG_CPP <<<"$(sed -n 's/^CPPFLAGS = //p' "$GLOBAL")"
OURS=(-Wall -Wmissing-prototypes -Werror=implicit-function-declaration -Werror)
SQS=()
for lib in libmicrohttpd libcurl; do
	if pkg-config --exists "$lib" 2>/dev/null; then
		read -r -a more <<<"$(pkg-config --cflags "$lib")"
		SQS+=("${more[@]}")
	fi
done
pkg-config --exists libcurl 2>/dev/null && SQS+=(-DQUEUE_SQS_CURL)

# The endpoint's library only where its header is (as the Makefile builds it).
HAVE_MHD=0
{ pkg-config --exists libmicrohttpd 2>/dev/null || [ -f /usr/include/microhttpd.h ]; } && HAVE_MHD=1
[ "$HAVE_MHD" = 1 ] || echo "compile_check: no libmicrohttpd header: src/sqs/ not checked"

cd "$REPO"
failed=0
n=0
for f in src/*.c src/*/*.c; do
	extra=()
	case $f in
	src/sqs/*)
		[ "$HAVE_MHD" = 1 ] || continue
		extra=("${SQS[@]}")
		;;
	esac
	n=$((n + 1))
	if ! gcc "${PG_FLAGS[@]}" "${OURS[@]}" -I src -I "$INC" "${PG_CPP[@]}" "${extra[@]}" \
		-c "$f" -o /dev/null; then
		failed=$((failed + 1))
	fi
done
# What queue_sqs.so calls in queue.so must be exported (PGXS hides a
# module's symbols from 16 on): every declaration of src/core_api.h.
if grep -E '^extern ' src/core_api.h | grep -v PGDLLEXPORT; then
	echo "compile_check: the declarations above in src/core_api.h lack PGDLLEXPORT"
	failed=$((failed + 1))
fi
if [ "$failed" -gt 0 ]; then
	echo "compile_check: $failed of $n files do not compile against PostgreSQL $MAJOR ($INC)"
	exit 1
fi
echo "compile_check: $n files compile against PostgreSQL $MAJOR with -Werror"
