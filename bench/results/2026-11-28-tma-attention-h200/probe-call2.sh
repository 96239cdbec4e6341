#!/usr/bin/env bash
# Call 2: TMA pages at 16 sequences and 4,096 new tokens (the rows nearest 1.5x of the floor),
# and the deep kernel's per-launch times with and without TMA pages at 1,280 and 4,096 positions.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -x .device/dice_engine_cuda_tests ] || { xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests; }
start=$SECONDS
DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=16 DICE_ATTENTION_CONTEXTS=1280,4096 \
  timeout 90 .device/dice_engine_cuda_tests --gtest_filter='CudaOps.AttentionTimings' 2>&1 | grep -vE '^\[|^Note|^$' > "$OUT/call2-attention-timings.txt"
cat "$OUT/call2-attention-timings.txt"
echo "timings took $((SECONDS - start)) s"
start=$SECONDS
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=330 \
  VARIANTS=';--tma-attention-pages' bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call2-variants-16x4096.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call2-variants-16x4096.jsonl"
grep -A8 "mean tokens" "$OUT/call2-variants-16x4096.txt"
echo "variants took $((SECONDS - start)) s"
