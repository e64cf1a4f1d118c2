#!/usr/bin/env bash
# netns.sh PACKAGE "OCTETS" [ARGS...] builds kubeboot (or takes
# $KUBEBOOT_BIN) and the benchmark
# package bench/PACKAGE, then runs its benchmarks inside a private network
# namespace (and a mount namespace: what a kubelet mounts goes with it)
# whose lo holds 198.51.100.<octet> for each of OCTETS (and
# 2001:db8::<octet> too with IPV6=1): nothing leaves the machine. Needs root (unshare --net). ARGS go to the benchmark
# binary, e.g. -test.benchtime 5x.
set -euo pipefail
pkg=$1 octets=$2
shift 2
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# As the tests and hack/release.sh build it; $KUBEBOOT_BIN, if set, is
# the binary to measure instead (a release, another commit's).
bin=${KUBEBOOT_BIN:-$(go run ./bench/internal/build "$tmp")}
go test -c -o "$tmp/bench.test" "./bench/$pkg"
KUBEBOOT_BIN="$bin" IPV6="${IPV6:-}" unshare --net --mount -- sh -c '
	set -e
	ip link set lo up
	for i in '"$octets"'; do
		ip addr add 198.51.100.$i/32 dev lo
		if [ -n "$IPV6" ]; then ip addr add 2001:db8::$i/128 dev lo nodad; fi
	done
	exec "$@"' sh "$tmp/bench.test" -test.run '^$' -test.bench . "$@"
