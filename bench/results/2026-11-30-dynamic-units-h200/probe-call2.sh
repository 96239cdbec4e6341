#!/usr/bin/env bash
# Call 2: CudaOps.PersistentStreamTimings at 1 sequence (4 rows), each layer GEMM alone (both
# models): which projections the dynamic units win on.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
DICE_PERSISTENT_TIMINGS=1 DICE_PERSISTENT_ROWS=4 DICE_PERSISTENT_MODELS=4b-qkv,4b-o,4b-gate-up,4b-down,1.7b-qkv,1.7b-o,1.7b-gate-up,1.7b-down timeout 300 "$(probe_tests)" \
  --gtest_filter=CudaOps.PersistentStreamTimings 2>&1 | tee "$OUT/$PROBE-persistent.txt" |
  grep -vE "^\[ *(RUN|OK) "
