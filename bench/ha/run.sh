#!/usr/bin/env bash
# Runs BenchmarkServices inside a private network namespace whose lo holds
# 198.51.100.1-3 (kubeboot's servers) and .11-.13 (the peer's etcd
# members): nothing leaves the machine. Needs root (unshare --net). Extra
# arguments go to the benchmark binary, e.g. -test.benchtime 3x -peer.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/kubeboot" ./cmd/kubeboot
go test -c -o "$tmp/ha.test" ./bench/ha
KUBEBOOT_BIN="$tmp/kubeboot" unshare --net -- sh -c '
	set -e
	ip link set lo up
	for i in 1 2 3 11 12 13; do ip addr add 198.51.100.$i/32 dev lo; done
	exec "$@"' sh "$tmp/ha.test" -test.run '^$' -test.bench . "$@"
