#!/usr/bin/env bash
# netns.sh PACKAGE "OCTETS" [ARGS...] builds kubeboot (or takes
# $KUBEBOOT_BIN) and the benchmark
# package bench/PACKAGE, then runs its benchmarks inside a private network
# namespace (and a mount namespace: what a kubelet mounts goes with it)
# whose lo holds 198.51.100.<octet> for each of OCTETS: nothing
# leaves the machine. Needs root (unshare --net). ARGS go to the benchmark
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
KUBEBOOT_BIN="$bin" unshare --net --mount -- sh -c '
	set -e
	ip link set lo up
	for i in '"$octets"'; do ip addr add 198.51.100.$i/32 dev lo; done
	exec "$@"' sh "$tmp/bench.test" -test.run '^$' -test.bench . "$@"
