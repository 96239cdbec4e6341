#!/usr/bin/env bash
# Call 9: the attention tests after their review mend (a shared launch helper and store-pass
# items; the same cases), and the backend's deep/paired test.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call9
probe_unpack_tests
timeout 200 .device/dice_engine_cuda_tests --gtest_filter='CudaOps.DeepPaired*:CudaOps.AttentionWithSeveralWorkItemsPerBlock:CudaOps.AttentionOverThePagedCache:CudaBackendTest.DeepAndPairedAttention*' > "$OUT/$PROBE-tests.txt" 2>&1
grep -E "^\[  (FAILED|     OK|  PASSED)" "$OUT/$PROBE-tests.txt"; grep -m3 -A6 "Failure" "$OUT/$PROBE-tests.txt"
