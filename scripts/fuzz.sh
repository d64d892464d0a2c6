#!/usr/bin/env bash
# Runs every native Go fuzz target in the module for the given time each
# (default 30s), one target at a time as go test requires.
#
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline
# exceeded" when -fuzztime expires while a worker is mid-call
# (https://go.dev/issue/75804, fixed in Go 1.27). That failure writes no
# crasher. A run that fails only that way, writes nothing under
# testdata/fuzz/<target>, and then passes on its whole corpus replayed is
# reported as the coordinator race and not counted; anything else fails.
set -euo pipefail
fuzztime=${1:-30s}
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
count=0
races=0
while IFS= read -r file; do
	dir=$(dirname "$file")
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		count=$((count + 1))
		echo "fuzz: ./$dir $target ($fuzztime)"
		corpus="$dir/testdata/fuzz/$target"
		before=$(ls "$corpus" 2>/dev/null | sort || true)
		if go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "./$dir" >"$log" 2>&1; then
			continue
		fi
		after=$(ls "$corpus" 2>/dev/null | sort || true)
		if [ "$before" = "$after" ] &&
			grep -q '^    context deadline exceeded$' "$log" &&
			! grep -qE '^\s+(Failing input written|panic:|.*_test\.go:[0-9]+:)' "$log" &&
			go test -run="^${target}\$" "./$dir" >/dev/null 2>&1; then
			echo "fuzz: $target hit the Go 1.26 fuzz-coordinator deadline race (go.dev/issue/75804): no crasher written, corpus replay passes"
			races=$((races + 1))
			continue
		fi
		cat "$log"
		status=1
	done
done < <(git ls-files '*_test.go' 2>/dev/null | xargs grep -l '^func Fuzz' | sort)
echo "fuzz: $count targets, $races coordinator races, $([ $status -eq 0 ] && echo ok || echo FAILED)"
exit $status
