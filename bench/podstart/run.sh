#!/usr/bin/env bash
# Runs BenchmarkPodStart in a private network and mount namespace with
# 198.51.100.1 (bench/internal/netns.sh): `kubeboot server --node` on
# containerd, on kubeboot's pod network. Needs containerd, runc and the
# CNI plugins (as .ci/run installs them). Extra arguments go to the
# benchmark binary, e.g. -test.benchtime=60x.
exec "$(dirname "$0")/../internal/netns.sh" podstart "1" -test.benchtime 30x "$@"
