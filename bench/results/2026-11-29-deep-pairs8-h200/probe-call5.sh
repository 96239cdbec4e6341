#!/usr/bin/env bash
# Call 5: the backend's refusal of deep paired warp counts other than 4 and 8 (added to
# BadInputIsRejectedAndNothingCommitted) and its deep paired test; then issue 6's benchmark at
# 1,024 new tokens, fused store, 1 / 16 / 128 sequences, both models, PyTorch beside, on this
# session's defaults (the deep paired attention with 8 warps from 0 positions).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call5
probe_unpack_tests
timeout 100 .device/dice_engine_cuda_tests --gtest_filter='CudaBackendTest.BadInput*:CudaBackendTest.DeepAndPaired*' > "$OUT/$PROBE-tests.txt" 2>&1
grep -E "^\[  (FAILED|     OK|  PASSED)" "$OUT/$PROBE-tests.txt"; grep -m5 -A8 "Failure" "$OUT/$PROBE-tests.txt"
MODELS=4b,1.7b SEQUENCES=1,16,128 NEW_TOKENS=1024 STORE=fused BENCH_LIMIT=300 bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in engine-bench.txt engine-bench.md engine-bench.tar.gz; do cp "$OUT/$f" "$OUT/$PROBE-$f" 2>/dev/null && rm -f "$OUT/$f"; done
rm -f "$OUT/engine-bench.log"
cat "$OUT/$PROBE-engine-bench.txt"
