#!/usr/bin/env bash
# Call 4: the two folds as separate options (--fold-qkv-norm, --fold-mlp-norm, both default on),
# the tests' uploads synchronised: the fold ops tests, then tokens/s at 16 sequences: both folds,
# the MLP fold alone, none (SDAR-4B and SDAR-1.7B at 16 x 1,024, two rounds), and SDAR-4B at
# 16 x 4,096 both against none (one round); same binary, alternating.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call4
probe_unpack_tests
timeout 60 .device/dice_engine_cuda_tests --gtest_filter='CudaOps.WgmmaGemmNormFold*:CudaOps.QkNormRope*' > "$OUT/$PROBE-fold-ops.txt" 2>&1
grep -E "^\[  (FAILED|     OK|  PASSED)" "$OUT/$PROBE-fold-ops.txt"; grep -m3 -A3 "Failure" "$OUT/$PROBE-fold-ops.txt"
none='--no-fold-qkv-norm --no-fold-mlp-norm'
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=150 probe_variants 4b-16 ";--no-fold-qkv-norm;$none"
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=100 probe_variants 1.7b-16 ";--no-fold-qkv-norm;$none"
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=1 VARIANTS_LIMIT=150 probe_variants 4b-16x4096 ";$none"
