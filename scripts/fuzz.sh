#!/usr/bin/env bash
# Fuzzes every parser for longer than scripts/test.sh does: each Fuzz target
# of every package for FUZZTIME (default 10m), one after another, then
# prints the executions per target. A crasher stops the run; Go writes it
# under the package's testdata/fuzz/<target>/, where it stays as a seed
# once checked in with its fix.
# Usage: bash scripts/fuzz.sh [PACKAGE-PATTERN [TARGET-REGEXP]]
#        FUZZTIME=2m bash scripts/fuzz.sh ./internal/chat FuzzRenderSource
# FUZZPARALLEL=N runs N fuzzing workers per target (default: one per core);
# FUZZSUMMARY=FILE appends each target's row (package, target, executions,
# time, date) to FILE as well, so a long run split over days adds up.
# FUZZKEEPGOING=1 records a finding and goes on to the next target instead
# of stopping; the run still exits 1 at the end if anything was found.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime="${FUZZTIME:-10m}"
parallel=()
[[ -n "${FUZZPARALLEL:-}" ]] && parallel=(-parallel "$FUZZPARALLEL")
pattern="${1:-./internal/...}"
only="${2:-.}"
found=0
log="$(mktemp)"
summary="$(mktemp)"
trap 'rm -f "$log" "$summary"' EXIT

for pkg in $(go list "$pattern"); do
  dir="$(go list -f '{{.Dir}}' "$pkg")"
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    [[ "$target" =~ $only ]] || continue
    echo "-- $pkg $target ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "${parallel[@]}" "$pkg" >"$log" 2>&1; then
      # a deadline reached mid-call is not a finding (see scripts/test.sh)
      if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
        echo "   (stopped at the deadline)"
      else
        cat "$log"
        if [[ "${FUZZKEEPGOING:-}" != 1 ]]; then exit 1; fi
        found=1
        printf '%s\t%s\tFINDING\n' "${pkg#github.com/aotlm/aotlm/}" "$target" | tee -a "$summary"
        continue
      fi
    fi
    execs="$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
    row="$(printf '%s\t%s\t%s' "${pkg#github.com/aotlm/aotlm/}" "$target" "${execs:-?}")"
    echo "$row" | tee -a "$summary"
    if [[ -n "${FUZZSUMMARY:-}" ]]; then
      printf '%s\t%s\t%s\n' "$row" "$fuzztime" "$(date -u +%Y-%m-%d)" >>"$FUZZSUMMARY"
    fi
  done
done
echo "== executions per target in $fuzztime"
column -t -s $'\t' "$summary" 2>/dev/null || cat "$summary"
exit "$found"
