#!/usr/bin/env bash
# Runs BenchmarkAgentJoin in a private network and mount namespace with
# 198.51.100.1 (bench/internal/netns.sh). Extra arguments go to the
# benchmark binary, e.g. -test.benchtime=20x.
exec "$(dirname "$0")/../internal/netns.sh" agent "1" -test.benchtime 10x "$@"
