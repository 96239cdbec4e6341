#!/usr/bin/env bash
# Call 3: the folds with the square sums loaded in parallel (q/k kernel: lanes and a warp tree;
# gate/up epilogue: loaded before the k loop), --fold-mlp-norm split out: the fold checks (the
# input-side test's own output kept), then SDAR-4B and SDAR-1.7B at 16 x 1,024: defaults (both
# folds), qkv fold only, no fold, same binary, alternating rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call3
probe_unpack_tests
timeout 60 .device/dice_engine_cuda_tests --gtest_filter='CudaOps.WgmmaGemmNormFold*:CudaOps.QkNormRope*' > "$OUT/$PROBE-fold-ops.txt" 2>&1
grep -E "^\[  (FAILED|     OK|  PASSED)" "$OUT/$PROBE-fold-ops.txt"; grep -m3 -A3 "Failure" "$OUT/$PROBE-fold-ops.txt"
probe_checks 100 'CudaBackendTest.FoldedNorms*:CudaBackendTest.WgmmaGemm*:CudaOps.WgmmaGemmSwiglu*' || echo "checks failed"
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=150 probe_variants 4b-16 ';--no-fold-mlp-norm;--no-fold-norms'
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=100 probe_variants 1.7b-16 ';--no-fold-mlp-norm;--no-fold-norms'
