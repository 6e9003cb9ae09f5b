#!/usr/bin/env bash
# Runs every check of the project: formatting, vet, the test suite (with the
# shared test data), short fuzzing of every parser, and the cross-builds.
# Usage: bash scripts/test.sh        (FUZZEXECS=50000 to fuzz longer)
set -euo pipefail
cd "$(dirname "$0")/.."

# Fuzzing is bounded by a count of executions, not by wall-clock time: with a
# duration, Go 1.26's coordinator can report a spurious "context deadline
# exceeded" failure when the time runs out while a worker is mid-call.
fuzzexecs="${FUZZEXECS:-5000}"
fuzzlog="$(mktemp)"
trap 'rm -f "$fuzzlog"' EXIT

echo "== gofmt"
unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "not gofmt-formatted:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

# the web chat test (serve) drives headless Chromium: CI installs it
if ! command -v chromium >/dev/null 2>&1 && [ "${CI:-}" = true ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
  fi
fi

# the official API clients' tests (serve) and the ONNX export's (ONNX
# Runtime's CPU library in onnxruntime-node) run under node: CI installs
# Debian's nodejs and npm, and the packages pinned in
# serve/testdata/clients and internal/onnxexport/testdata/ort
if ! command -v node >/dev/null 2>&1 && [ "${CI:-}" = true ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm) >/dev/null
  fi
fi
for d in serve/testdata/clients internal/onnxexport/testdata/ort; do
  if command -v npm >/dev/null 2>&1 && { [ "${CI:-}" = true ] || [ ! -d "$d/node_modules" ]; }; then
    (cd "$d" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  fi
done

echo "== go test"
go test -count=1 -timeout 30m ./...

# The AVX2 kernels are what most laptops run (no AVX-512): on a CPU with
# AVX-512 the kernel tests check them against the generic versions, and the
# engine's and models' tests run again on them here (GODEBUG masks AVX-512
# from the feature detection; elsewhere this repeats the run above).
if [ "$(go env GOARCH)" = amd64 ]; then
  echo "== go test on the AVX2 kernels (GODEBUG=cpu.avx512f=off)"
  GODEBUG=cpu.avx512f=off go test -count=1 -timeout 30m ./internal/kernel/ ./internal/engine/ ./internal/model/ ./internal/decoding/ ./internal/qmodel/ .
fi

echo "== go test -tags purego"
go test -count=1 -timeout 30m -tags purego ./internal/...

echo "== fuzz ($fuzzexecs executions per target)"
for pkg in $(go list ./...); do
  dir="$(go list -f '{{.Dir}}' "$pkg")"
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "-- $pkg $target"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "${fuzzexecs}x" -fuzzminimizetime 1s "$pkg" >"$fuzzlog" 2>&1 || { cat "$fuzzlog"; exit 1; }
  done
done

echo "== arm64 under qemu-user (kernels: NEON with SDOT and SMMLA, NEON only; engine; vision)"
if ! command -v qemu-aarch64 >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user) >/dev/null
  fi
fi
if command -v qemu-aarch64 >/dev/null 2>&1; then
  GOARCH=arm64 go vet ./internal/kernel ./internal/engine
  armdir="$(mktemp -d)"
  GOARCH=arm64 go vet ./internal/vision
  for pkg in kernel engine vision; do
    GOARCH=arm64 CGO_ENABLED=0 go test -c -o "$armdir/$pkg.test" "./internal/$pkg"
  done
  armrun() { # armrun DIR LABEL QEMU-ARGS...: run a test binary, print its output on failure
    local dir="$1" label="$2"; shift 2
    (cd "$dir" && qemu-aarch64 "$@" -test.count=1 >"$armdir/log" 2>&1) || { cat "$armdir/log"; exit 1; }
    echo "ok $label"
  }
  armrun internal/kernel "kernel (max cpu: neon+dotprod+i8mm)" "$armdir/kernel.test"
  armrun internal/kernel "kernel (cortex-a57: neon)" -cpu cortex-a57 "$armdir/kernel.test"
  armrun internal/engine engine "$armdir/engine.test"
  # image resizing must round as llama.cpp's (no fused multiply-adds)
  armrun internal/vision "vision (short)" "$armdir/vision.test" -test.short
  rm -rf "$armdir"
elif [ "${CI:-}" = true ]; then
  echo "qemu-aarch64 is missing and could not be installed"; exit 1
else
  echo "skipped: qemu-aarch64 not installed (apt-get install qemu-user)"
fi

# An AVX2 CPU without AVX-512 (Haswell) under qemu-user: a kernel that
# slips in an AVX-512 instruction passes on a machine that has AVX-512
# (GODEBUG only masks the detection) and dies here with SIGILL.
echo "== amd64 under qemu-user (-cpu Haswell, AVX2 without AVX-512: kernels, engine; -cpu Nehalem: kernels)"
if command -v qemu-x86_64 >/dev/null 2>&1; then
  x86dir="$(mktemp -d)"
  # The engine's tests that reach prefill, decode, every linear and
  # attention kind once: its parity suites (every family, batches) run on
  # the AVX2 kernels natively above, and emulated they took over 15
  # minutes on an Intel Xeon host (this run only looks for a SIGILL).
  engine_run='^(TestBidirectionalAttentionReference|TestF16Linear|TestHadamardRowMatchesReference|TestHeadRMSNormKernel|TestLinearParts|TestPoolCoversEveryIndexOnce|TestFloatLinear|TestQuantLinearExact|TestKVQuantizeMatchesQuant|TestAttentionU8Exact|TestFastAttention|TestRopeScaleKernel|TestPrefillLongPassSameBitsAsDecode|TestRewrittenArtifactRuns|TestDecodeWeights|TestPassEmbeds|TestBadF16Refused|TestF16RowsText|TestHugePagesSameLogits|TestPassPositions|TestTextAfterPositions)$'
  for pkg in kernel engine; do
    GOARCH=amd64 CGO_ENABLED=0 go test -c -o "$x86dir/$pkg.test" "./internal/$pkg"
    run=.
    [ "$pkg" = engine ] && run="$engine_run"
    (cd "internal/$pkg" && qemu-x86_64 -cpu Haswell "$x86dir/$pkg.test" -test.count=1 -test.run "$run" >"$x86dir/log" 2>&1) \
      || { grep -v 'warning: TCG' "$x86dir/log"; exit 1; }
    echo "ok $pkg (Haswell: avx2)"
  done
  # and a CPU without AVX (Nehalem): the generic kernels, no overlay
  (cd internal/kernel && qemu-x86_64 -cpu Nehalem "$x86dir/kernel.test" -test.count=1 >"$x86dir/log" 2>&1) \
    || { grep -v 'warning: TCG' "$x86dir/log"; exit 1; }
  echo "ok kernel (Nehalem: generic)"
  rm -rf "$x86dir"
elif [ "${CI:-}" = true ]; then
  echo "qemu-x86_64 is missing and could not be installed"; exit 1
else
  echo "skipped: qemu-x86_64 not installed (apt-get install qemu-user)"
fi

echo "== cross-builds (CGO_ENABLED=0)"
for target in linux/amd64 linux/arm64 android/arm64; do
  CGO_ENABLED=0 GOOS="${target%/*}" GOARCH="${target#*/}" go build -o /dev/null ./cmd/aotlm
  echo "ok $target"
done
echo "all checks passed"
