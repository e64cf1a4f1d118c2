#!/usr/bin/env bash
# Runs BenchmarkServices in a private network namespace with
# 198.51.100.1-3 (kubeboot's servers) and .11-.13 (the peer's etcd
# members), through bench/internal/netns.sh. Extra arguments go to the
# benchmark binary, e.g. -test.benchtime 3x -peer.
exec "$(dirname "$0")/../internal/netns.sh" ha "1 2 3 11 12 13" "$@"
