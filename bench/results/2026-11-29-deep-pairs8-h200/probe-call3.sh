#!/usr/bin/env bash
# Call 3: the backend's deep paired test again (call 2's copy held a dangling reference to a
# temporary list of shapes and crashed), then issue 6's benchmark at 16 x 4,096 (fused store) for
# SDAR-4B and SDAR-1.7B on the new defaults (8 warps from 0 positions).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call3
probe_unpack_tests
timeout 150 .device/dice_engine_cuda_tests --gtest_filter='CudaBackendTest.DeepAndPaired*:CudaOps.DeepPaired*' > "$OUT/$PROBE-tests.txt" 2>&1
grep -E "^\[  (FAILED|     OK|  PASSED)" "$OUT/$PROBE-tests.txt"; grep -m5 -A8 "Failure" "$OUT/$PROBE-tests.txt"
MODELS=4b,1.7b SEQUENCES=16 NEW_TOKENS=4096 STORE=fused BENCH_LIMIT=330 bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in engine-bench.txt engine-bench.md engine-bench.tar.gz; do cp "$OUT/$f" "$OUT/$PROBE-$f" 2>/dev/null && rm -f "$OUT/$f"; done
rm -f "$OUT/engine-bench.log"
cat "$OUT/$PROBE-engine-bench.txt"
