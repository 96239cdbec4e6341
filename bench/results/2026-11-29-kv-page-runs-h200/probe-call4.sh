#!/usr/bin/env bash
# Call 4: the KV cache's pages in runs a sequence (kv_page_runs, on): tokens/s against
# --no-kv-page-runs (the lowest free page: side-by-side sequences interleave page by page) at
# SDAR-4B 16 x 4,096, 16 x 1,024 and 128 x 1,024 and SDAR-1.7B 16 x 1,024; then every GPU test.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call4
probe_unpack_tests
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=1 VARIANTS_LIMIT=150 probe_variants 4b-16x4096 ";--no-kv-page-runs"
MODELS=4b,1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=1 VARIANTS_LIMIT=100 probe_variants 16 ";--no-kv-page-runs"
MODELS=4b SEQUENCES=128 NEW_TOKENS=1024 REPEATS=1 VARIANTS_LIMIT=120 probe_variants 4b-128 ";--no-kv-page-runs"
start=$SECONDS
probe_checks 300 '*'
echo "checks took $((SECONDS - start)) s"
