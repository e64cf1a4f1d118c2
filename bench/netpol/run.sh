#!/usr/bin/env bash
# Runs bench/netpol's benchmarks in a private network and mount namespace
# with 198.51.100.1 (bench/internal/netns.sh): `kubeboot server` for the
# API, the NetworkPolicy enforcer in the benchmark's process, two Pods as
# network namespaces. Needs root and nft. Extra arguments go to the
# benchmark binary, e.g. -test.bench PolicyChange -test.benchtime 50x.
exec "$(dirname "$0")/../internal/netns.sh" netpol "1" "$@"
