#!/usr/bin/env bash
# Runs every Go fuzz target of the module (func FuzzX(f *testing.F)) for
# FUZZTIME each, one after another: CI gives each a few seconds (the
# default, 3s); on a machine of its own, FUZZTIME=10m is issue 64's run.
# FUZZ, a regexp, picks targets by name, FUZZ_SKIP leaves some out;
# FUZZ_PARALLEL sets each run's
# workers (default: the CPUs). A finding fails the run and is kept in the
# package's testdata/fuzz/<target>, where `go test` then replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-3s}
pattern=${FUZZ:-.}
skip=${FUZZ_SKIP:-^$}
parallel=()
[[ -n ${FUZZ_PARALLEL:-} ]] && parallel=(-parallel "$FUZZ_PARALLEL")
for file in $(git grep -l '^func Fuzz' -- '*_test.go'); do
	dir=./$(dirname "$file")
	for name in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
		[[ $name =~ $pattern && ! $name =~ $skip ]] || continue
		echo "== fuzz $dir $name for $fuzztime"
		go test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" "${parallel[@]}" "$dir"
	done
done
