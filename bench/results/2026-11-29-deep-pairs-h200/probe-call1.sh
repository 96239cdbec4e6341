#!/usr/bin/env bash
# Call 1: the deep paired attention kernel (AttentionKernel::kTensorCoresDeepPaired, on by
# default as --deep-attention-pairs): its GPU tests, per-launch times on the fused store passes'
# shape (8 rows a sequence, 16 sequences) with the deep_pair column, then tokens/s with and
# without it (SDAR-4B 16 x 4,096 one round, 16 x 1,024 two rounds; same binary, alternating).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
timeout 150 .device/dice_engine_cuda_tests --gtest_filter='CudaOps.DeepPairedAttention*:CudaOps.AttentionWithSeveralWorkItemsPerBlock:CudaBackendTest.DeepAndPairedAttention*' > "$OUT/$PROBE-deep-pair-tests.txt" 2>&1
grep -E "^\[  (FAILED|     OK|  PASSED)" "$OUT/$PROBE-deep-pair-tests.txt"; grep -m3 -A4 "Failure" "$OUT/$PROBE-deep-pair-tests.txt"
start=$SECONDS
DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=16 DICE_ATTENTION_CONTEXTS=640,1280,2560,4096 \
  timeout 120 .device/dice_engine_cuda_tests --gtest_filter='CudaOps.AttentionTimings' 2>&1 | grep -vE '^\[|^Note|^$' > "$OUT/$PROBE-attention-timings.txt"
cat "$OUT/$PROBE-attention-timings.txt"
echo "timings took $((SECONDS - start)) s"
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=1 VARIANTS_LIMIT=150 probe_variants 4b-16x4096 ";--no-deep-attention-pairs"
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=120 probe_variants 4b-16 ";--no-deep-attention-pairs"
