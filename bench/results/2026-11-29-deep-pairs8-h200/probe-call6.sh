#!/usr/bin/env bash
# Call 6 (second try: the first built the Gemm with 64 skinny rows, so 64 rows were skinny): the new refusal test of Gemm::run_folded, with the GEMM tests beside it.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call6
probe_unpack_tests
timeout 90 .device/dice_engine_cuda_tests --gtest_filter='CudaOps.FoldedGemm*:CudaOps.WgmmaGemmNormFold*:CudaOps.WgmmaMinBlockK*' > "$OUT/$PROBE-tests.txt" 2>&1
grep -E "^\[  (FAILED|     OK|  PASSED|  SKIPPED)" "$OUT/$PROBE-tests.txt"; grep -m5 -A8 "Failure" "$OUT/$PROBE-tests.txt"
