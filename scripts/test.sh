#!/usr/bin/env bash
# Runs every check of the project: formatting, vet, the test suite (with the
# shared test data), short fuzzing of every parser, and the cross-builds.
# Usage: bash scripts/test.sh        (FUZZTIME=10s to fuzz longer)
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime="${FUZZTIME:-3s}"
fuzzlog="$(mktemp)"
trap 'rm -f "$fuzzlog"' EXIT

echo "== gofmt"
unformatted="$(gofmt -l cmd internal)"
if [ -n "$unformatted" ]; then
  echo "not gofmt-formatted:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test"
go test -count=1 ./...

echo "== go test -tags purego"
go test -count=1 -tags purego ./internal/...

echo "== fuzz ($fuzztime per target)"
for pkg in $(go list ./internal/...); do
  dir="$(go list -f '{{.Dir}}' "$pkg")"
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "-- $pkg $target"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s "$pkg" >"$fuzzlog" 2>&1 || { cat "$fuzzlog"; exit 1; }
  done
done

echo "== cross-builds (CGO_ENABLED=0)"
for target in linux/amd64 linux/arm64 android/arm64; do
  CGO_ENABLED=0 GOOS="${target%/*}" GOARCH="${target#*/}" go build -o /dev/null ./cmd/aotlm
  echo "ok $target"
done
echo "all checks passed"
