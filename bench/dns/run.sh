#!/usr/bin/env bash
# Runs BenchmarkClusterDNS and BenchmarkClusterDNSFromPod (which needs
# containerd, runc and the CNI plugins) in a private network and mount
# namespace with 198.51.100.1 (bench/internal/netns.sh). Extra arguments
# go to the benchmark binary, e.g. -test.benchtime=5x.
exec "$(dirname "$0")/../internal/netns.sh" dns "1" -test.benchtime 3x "$@"
