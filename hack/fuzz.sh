#!/usr/bin/env bash
# Runs every Go fuzz target of the module (func FuzzX(f *testing.F)) for
# FUZZTIME each, one after another: CI gives each a thousand inputs (the
# default, 1000x: 0.2-15 s a target here); on a machine of its own,
# FUZZTIME=10m is issue 64's run.
# FUZZ, a regexp, picks targets by name, FUZZ_SKIP leaves some out;
# FUZZ_PARALLEL sets each run's
# workers (default: the CPUs). A finding fails the run and is kept in the
# package's testdata/fuzz/<target>, where `go test` then replays it.
#
# Go 1.26's fuzz coordinator can fail a run at the end of a -fuzztime
# duration with a bare "context deadline exceeded" when a loaded machine's
# worker is slow to stop (golang/go#75804, fixed in Go 1.27): no input is
# written then. A count (Nx) sets no deadline, so CI's default cannot meet
# it; CI met it twice in a row with 3s. A run that fails without writing a
# new input to testdata/fuzz/<target> is run once more; a second failure
# fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-1000x}
pattern=${FUZZ:-.}
skip=${FUZZ_SKIP:-^$}
parallel=()
# inputs prints how many inputs a target's corpus directory holds.
inputs() {
	local files=("$1"/*)
	echo "${#files[@]}"
}
shopt -s nullglob
[[ -n ${FUZZ_PARALLEL:-} ]] && parallel=(-parallel "$FUZZ_PARALLEL")
for file in $(git grep -l '^func Fuzz' -- '*_test.go'); do
	dir=./$(dirname "$file")
	for name in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
		[[ $name =~ $pattern && ! $name =~ $skip ]] || continue
		echo "== fuzz $dir $name for $fuzztime"
		corpus="$dir/testdata/fuzz/$name"
		before=$(inputs "$corpus")
		go test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" "${parallel[@]}" "$dir" && continue
		if (( $(inputs "$corpus") > before )); then
			exit 1
		fi
		echo "== fuzz $dir $name failed without writing an input (golang/go#75804): once more"
		go test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" "${parallel[@]}" "$dir"
	done
done
