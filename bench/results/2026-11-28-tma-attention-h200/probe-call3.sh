#!/usr/bin/env bash
# Call 3: the deep kernel with and without TMA pages on the block-only passes' shape (a block of
# 4 per sequence, DICE_ATTENTION_ROWS=4), and --tma-attention-min-keys (the TMA deep kernel for
# passes of one to two waves of tiles over long ranges: SDAR-4B's fused store passes).
set -uo pipefail
cd "$(dirname "$0")/.."
[ -x .device/dice_engine_cuda_tests ] || { xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests; }
start=$SECONDS
DICE_ATTENTION_ROWS=4 DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=16 DICE_ATTENTION_CONTEXTS=640,1280,2560,4096 \
  timeout 90 .device/dice_engine_cuda_tests --gtest_filter='CudaOps.AttentionTimings' 2>&1 | grep -vE '^\[|^Note|^$' > "$OUT/call3-attention-timings-rows4.txt"
cat "$OUT/call3-attention-timings-rows4.txt"
echo "timings took $((SECONDS - start)) s"
start=$SECONDS
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=300 \
  VARIANTS=';--tma-attention-min-keys 1024;--tma-attention-min-keys 2048' bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call3-variants-4b-16x4096.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call3-variants-4b-16x4096.jsonl"
grep -A8 "mean tokens" "$OUT/call3-variants-4b-16x4096.txt"
echo "variants took $((SECONDS - start)) s"
