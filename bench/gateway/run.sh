#!/usr/bin/env bash
# Runs the gateway benchmarks in a private network and mount namespace
# with 198.51.100.1 (bench/internal/netns.sh): `kubeboot server --node`
# serving a Gateway of 1,000 HTTPRoutes. Needs containerd, runc and the
# CNI plugins (as .ci/run installs them). Extra arguments go to the
# benchmark binary, e.g. -test.benchtime=50x.
exec "$(dirname "$0")/../internal/netns.sh" gateway "1" -test.benchtime 30x "$@"
