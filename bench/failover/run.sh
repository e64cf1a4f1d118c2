#!/usr/bin/env bash
# Runs BenchmarkFailover in a private network namespace with
# 198.51.100.1-3 (bench/internal/netns.sh). Extra arguments go to the
# benchmark binary, e.g. -test.benchtime=10x.
exec "$(dirname "$0")/../internal/netns.sh" failover "1 2 3" -test.benchtime 5x "$@"
