#!/usr/bin/env bash
# Runs every native Go fuzz target in the module for the given time each
# (default 30s), one target at a time as go test requires.
set -euo pipefail
fuzztime=${1:-30s}
cd "$(dirname "$0")/.."
status=0
count=0
while IFS= read -r file; do
	dir=$(dirname "$file")
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		count=$((count + 1))
		echo "fuzz: ./$dir $target ($fuzztime)"
		if ! go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "./$dir" >"/tmp/fuzz.$$.log" 2>&1; then
			cat "/tmp/fuzz.$$.log"
			status=1
		fi
	done
done < <(git ls-files '*_test.go' 2>/dev/null | xargs grep -l '^func Fuzz' | sort)
rm -f "/tmp/fuzz.$$.log"
echo "fuzz: $count targets, $([ $status -eq 0 ] && echo ok || echo FAILED)"
exit $status
