#!/usr/bin/env bash
# Soaks the server longer than the test suite does: serve's TestLoad with
# SOAK_REQUESTS requests (default 2000) from 8 concurrent clients with
# three API keys, a quarter cancelled early, half streamed, some held to
# JSON; then TestLoadMulti with as many requests for two models in a
# memory budget that holds one (they load and unload all along). It fails
# when a request that is not cancelled fails or is malformed, when a
# goroutine is left over, when the heap grows, or when the resident memory
# after the first tenth of the requests grows by more than 32 MiB; it
# prints the counts, the shared decode passes, the loads and the memory
# figures.
# Usage: bash scripts/soak.sh
#        SOAK_REQUESTS=10000 bash scripts/soak.sh
# The shared test data (stories260K) must be where the tests find it.
set -euo pipefail
cd "$(dirname "$0")/.."

AOTLM_SOAK_REQUESTS="${SOAK_REQUESTS:-2000}" go test -count=1 -timeout 60m -run '^(TestLoad|TestLoadMulti)$' -v ./serve | grep -v '^=== '
