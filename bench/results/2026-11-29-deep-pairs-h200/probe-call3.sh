#!/usr/bin/env bash
# Call 3: the deep pairs only from a pass's longest sequence of N positions on
# (--deep-attention-pairs-min-keys, default 1536): the backend test, then SDAR-4B 16 x 4,096 with
# N = 1536 (default), 0, 2560 and without deep pairs (one round, alternating, same binary).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call3
probe_unpack_tests
timeout 120 .device/dice_engine_cuda_tests --gtest_filter='CudaBackendTest.DeepAndPairedAttention*:CudaOps.DeepPaired*' > "$OUT/$PROBE-tests.txt" 2>&1
grep -E "^\[  (FAILED|     OK|  PASSED)" "$OUT/$PROBE-tests.txt"; grep -m3 -A6 "Failure" "$OUT/$PROBE-tests.txt"
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=1 VARIANTS_LIMIT=240 probe_variants 4b-16x4096 ";--deep-attention-pairs-min-keys 0;--deep-attention-pairs-min-keys 2560;--no-deep-attention-pairs"
