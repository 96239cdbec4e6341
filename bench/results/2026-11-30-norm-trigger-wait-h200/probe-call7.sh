#!/usr/bin/env bash
# Call 7: the input RMSNorm folded into the streaming down projection before it (experiment
# commit, DICE_EXP_STREAM_FOLD=1 through .device/dice_fold, a two-line wrapper): the down GEMM's
# epilogue also writes bf16(w x) and x's square sums per 16-column tile, qkv reads that, the q/k
# kernel applies 1 / r; no norm kernel before qkv. Whole tiles only, so SDAR-1.7B (SDAR-4B's down
# takes the split walk). First the streaming backend test against the CPU logits with it (its
# folded-norm count printed), then SDAR-1.7B 1 x 1,024 side by side.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call7
probe_unpack_tests
for fold in 0 1; do
  echo "DICE_EXP_STREAM_FOLD=$fold"
  if [ "$fold" = 1 ]; then export DICE_EXP_STREAM_FOLD=1; fi
  timeout 120 .device/dice_engine_cuda_tests \
    --gtest_filter='CudaBackendTest.StreamGemmLogitsMatchTheCpuReference' 2>&1 |
    grep -E "folded_norms|OK|FAILED|PASSED|Failure|rel|expected" | head -20
  unset DICE_EXP_STREAM_FOLD
done | tee "$OUT/$PROBE-check-tests.txt"
grep -q "FAILED" "$OUT/$PROBE-check-tests.txt" && exit 1
printf '#!/bin/bash\nDICE_EXP_STREAM_FOLD=1 exec "$(dirname "$0")/dice" "$@"\n' >.device/dice_fold
chmod +x .device/dice_fold
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=200 probe_variants \
  stream-fold ' ;bin=.device/dice_fold'
