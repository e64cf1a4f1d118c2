#!/usr/bin/env bash
# Runs the dual-stack benchmarks in a private network and mount namespace
# with 198.51.100.1 and 2001:db8::1 (bench/internal/netns.sh): a
# dual-stack `kubeboot server --node` on containerd, on kubeboot's pod
# network. Needs containerd, runc and the CNI plugins (as .ci/run installs
# them). Extra arguments go to the benchmark binary, e.g.
# -test.benchtime=40x.
IPV6=1 exec "$(dirname "$0")/../internal/netns.sh" dualstack "1" -test.benchtime 20x "$@"
