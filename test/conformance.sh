#!/usr/bin/env bash
# make conformance: LocalStack's SQS suite (its snapshots record real AWS)
# against this build's SQS endpoint, by ../shared/conformance/localstack/run.sh
# (its README says what it reads).  Not part of make test.
#
# It needs four public repositories as bare git mirrors (localstack,
# localstack-snapshot, rolo, plux; run.sh names the pinned commits) in a
# .mirror folder above ../shared/conformance/localstack, or where MIRRORS
# says; this script lists the ones missing and stops (exit 2) when any
# is.  As root it installs the Debian Python packages the suite imports
# when missing (run.sh's list, and python3-rich, which LocalStack's
# bootstrap imports).  It then runs make install and run.sh, passing the
# environment through: STRICT=1 compares every snapshot path with AWS,
# PYTEST_ARGS picks tests, GOAL sets the ratio below which it fails.
# The last line is run.sh's: "localstack sqs: P passed, F failed of N (ratio R)".
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNNER=$REPO/../shared/conformance/localstack/run.sh
[ -x "$RUNNER" ] || { echo "conformance: no $RUNNER (../shared beside the repository)" >&2; exit 2; }

mirrors=${MIRRORS:-}
if [ -z "$mirrors" ]; then
	d=$(cd "$(dirname "$RUNNER")" && pwd)
	while [ "$d" != / ]; do
		d=$(dirname "$d")
		[ -d "$d/.mirror" ] && { mirrors=$d/.mirror; break; }
	done
fi
missing=()
for r in localstack+localstack localstack+localstack-snapshot localstack+rolo localstack+plux; do
	[ -n "$mirrors" ] && [ -d "$mirrors/$r/repo" ] || missing+=("github:${r/+//}")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "conformance: mirrors missing (bare git mirrors as .mirror/<owner>+<name>/repo): ${missing[*]}"
	exit 2
fi

pkgs=(python3-pytest python3-deepdiff python3-cachetools python3-dnspython python3-dnslib python3-semver
	python3-psutil python3-dotenv python3-asn1crypto python3-cbor2 python3-xmltodict python3-rich)
need=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" -eq 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null ||
			{ echo "conformance: apt-get install ${need[*]} failed" >&2; exit 2; }
	else
		echo "conformance: missing Debian packages: ${need[*]}" >&2
		exit 2
	fi
fi

make -C "$REPO" install >/dev/null || exit 2
# (from /tmp: a python started in the repository would import queue.so as
# its module "queue")
cd /tmp && MIRRORS=$mirrors exec bash "$RUNNER"
