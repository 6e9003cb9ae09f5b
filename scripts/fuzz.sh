#!/usr/bin/env bash
# Fuzzes every parser for longer than scripts/test.sh does: each Fuzz target
# of every package for FUZZTIME (default 10m), one after another, then
# prints the executions per target. A crasher stops the run; Go writes it
# under the package's testdata/fuzz/<target>/, where it stays as a seed
# once checked in with its fix.
# Usage: bash scripts/fuzz.sh [PACKAGE-PATTERN [TARGET-REGEXP]]
#        FUZZTIME=2m bash scripts/fuzz.sh ./internal/chat FuzzRenderSource
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime="${FUZZTIME:-10m}"
pattern="${1:-./internal/...}"
only="${2:-.}"
log="$(mktemp)"
summary="$(mktemp)"
trap 'rm -f "$log" "$summary"' EXIT

for pkg in $(go list "$pattern"); do
  dir="$(go list -f '{{.Dir}}' "$pkg")"
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    [[ "$target" =~ $only ]] || continue
    echo "-- $pkg $target ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1; then
      # a deadline reached mid-call is not a finding (see scripts/test.sh)
      if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
        echo "   (stopped at the deadline)"
      else
        cat "$log"; exit 1
      fi
    fi
    execs="$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
    printf '%s\t%s\t%s\n' "${pkg#github.com/aotlm/aotlm/}" "$target" "${execs:-?}" | tee -a "$summary"
  done
done
echo "== executions per target in $fuzztime"
column -t -s $'\t' "$summary" 2>/dev/null || cat "$summary"
