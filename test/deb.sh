#!/usr/bin/env bash
# test/deb.sh: the Debian packages (postgresql-NN-queue), by Debian's
# conventions for PostgreSQL extensions (pg_buildext, debian/pgversions).
#
#   bash test/deb.sh build   build one package per PostgreSQL major this
#                            machine has the server headers of (make deb)
#   bash test/deb.sh test    build, then: install the package with dpkg,
#                            run the regress suite (both storage layouts)
#                            against what the package installed, remove
#                            the package and check that it left nothing
#                            (make deb-test)
#
# The build runs on a copy of the tracked files (git ls-files) in
# /tmp/queue-deb, never in the working tree; the packages, lintian's
# report and the build log land in .deb/ (git-ignored).  The version is
# queue.control's default_version: test/release_meta.py --write puts it in
# META.json and writes debian/changelog (of the copy) from it.
#
# The test replaces what `make install` put in PostgreSQL's directories
# with the package's files and removes them with the package; when it is
# run from a build tree it runs `make install` again at the end, so the
# tree's suites find the extension.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$REPO/.deb
WORK=/tmp/queue-deb
mode=${1:-build}

die() { echo "deb: $*" >&2; exit 1; }

need=()
for p in debhelper lintian fakeroot postgresql-server-dev-all dpkg-dev libmicrohttpd-dev libcurl4-openssl-dev libssl-dev pkgconf; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || die "missing packages: ${need[*]} (as root: apt-get install ${need[*]})"
	echo "deb: apt-get install ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi

version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$REPO/queue.control")
[ -n "$version" ] || die "queue.control names no default_version"

build() {
	rm -rf "$WORK" "$OUT"
	mkdir -p "$WORK/queue-$version" "$OUT"
	(cd "$REPO" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar cf - 2>/dev/null) | tar xf - -C "$WORK/queue-$version"
	cd "$WORK/queue-$version"
	python3 test/release_meta.py --write >/dev/null
	pg_buildext updatecontrol
	echo "deb: building queue $version for PostgreSQL $(pg_buildext supported-versions | xargs)"
	if ! dpkg-buildpackage -us -uc -b >"$OUT/build.log" 2>&1; then
		tail -n 30 "$OUT/build.log"
		die "dpkg-buildpackage failed (log: $OUT/build.log)"
	fi
	cp "$WORK"/*.deb "$WORK"/*.changes "$WORK"/*.buildinfo "$OUT/"
	# lintian: errors fail the build; warnings and info are in the report
	lintian --info --display-info "$WORK"/*.changes >"$OUT/lintian.txt" 2>&1 || true
	sed 's/^/  lintian: /' "$OUT/lintian.txt"
	if grep -q '^E:' "$OUT/lintian.txt"; then
		die "lintian reports errors ($OUT/lintian.txt)"
	fi
	echo "deb: $(cd "$OUT" && ls ./*.deb | xargs) in $OUT; lintian: $(grep -c '^E:' "$OUT/lintian.txt" || true) errors, $(grep -c '^W:' "$OUT/lintian.txt" || true) warnings"
}

install_test() {
	local deb v pkg rc=0 files
	[ "$(id -u)" -eq 0 ] || die "the install test needs root (dpkg -i)"
	for deb in "$OUT"/postgresql-*-queue_*.deb; do
		pkg=$(dpkg-deb -f "$deb" Package)
		v=${pkg#postgresql-}
		v=${v%-queue}
		echo "deb: installing $pkg"
		dpkg -i "$deb" >/dev/null
		# what the server loads is the package's, not a build tree's
		for f in "$(/usr/lib/postgresql/"$v"/bin/pg_config --pkglibdir)/queue.so" \
			"$(/usr/lib/postgresql/"$v"/bin/pg_config --sharedir)/extension/queue.control"; do
			dpkg -S "$f" | grep -q "^$pkg:" || die "$f is not $pkg's"
		done
		# the regress suite of a clean copy (no build tree, no make install)
		# against the installed package, on fresh clusters of that major
		rm -rf "$WORK/check"
		mkdir -p "$WORK/check"
		(cd "$REPO" && git ls-files -z --cached --others --exclude-standard test/sql test/specs test/queue.conf test/run_tests.sh expected queue.control sql README.md docs |
			xargs -0 tar cf -) | tar xf - -C "$WORK/check"
		(cd "$WORK/check" && PG_CONFIG=/usr/lib/postgresql/$v/bin/pg_config \
			QUEUE_TESTS="$(cd "$REPO/test/sql" && ls ./*.sql | sed 's|^\./||; s/\.sql$//' | xargs)" \
			bash test/run_tests.sh) | tail -n 3 || rc=1
		files=$(dpkg -L "$pkg" | grep -E '\.(so|control|sql)$' || true)
		echo "deb: removing $pkg"
		dpkg -r "$pkg" >/dev/null
		for f in $files; do
			[ ! -e "$f" ] || die "$f is still there after dpkg -r $pkg"
		done
		echo "deb: $pkg removed, its $(echo "$files" | wc -w) files gone"
	done
	if [ -f "$REPO/Makefile" ] && [ -d "$REPO/src" ]; then
		make -C "$REPO" install >/dev/null
	fi
	return $rc
}

case "$mode" in
build) build ;;
test) build; install_test ;;
*) die "usage: test/deb.sh build|test" ;;
esac
