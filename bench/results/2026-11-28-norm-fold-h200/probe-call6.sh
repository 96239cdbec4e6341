#!/usr/bin/env bash
# Call 6: every GPU test of the final engine code (both norm folds on by default; the early-weights
# limit of call 5 removed), then SDAR-1.7B at 16 x 4,096 with and without the folds (one round).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call6
probe_unpack_tests
probe_checks 420 '*'
grep -cE "^PASS" "$OUT/$PROBE-check-tests.txt"
grep -E "^FAIL|SKIP" "$OUT/$PROBE-check-tests.txt" | head
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=1 VARIANTS_LIMIT=100 probe_variants 1.7b-16x4096 ';--no-fold-qkv-norm --no-fold-mlp-norm'
