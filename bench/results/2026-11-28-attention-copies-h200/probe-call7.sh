#!/usr/bin/env bash
# Call 7: the deep attention kernel with two warps per page stream (16 positions of each page
# each): its tests, per-launch times against the base build, tokens/s at 16 sequences.
set -uo pipefail
cd "$(dirname "$0")/.."
for b in dice_engine_cuda_tests tests_new; do
  [ -x .device/$b ] || { xz -dc .device/$b.xz > .device/$b && chmod +x .device/$b; }
done
source bench/common_device.sh
source bench/engine_device.sh
start=$SECONDS
{ machine_header; timeout 90 .device/tests_new --gtest_filter='CudaOps.Attention*:CudaBackendTest.DeepAndPaired*:CudaBackendTest.LogitsMatch*:CudaBackendTest.Seeded*' --gtest_brief=1 2>&1 | tail -25; } > "$OUT/call7-tests-new.txt" 2>&1
tail -8 "$OUT/call7-tests-new.txt"
echo "tests took $((SECONDS - start)) s"
start=$SECONDS
for b in dice_engine_cuda_tests tests_new dice_engine_cuda_tests tests_new; do
  echo "## $b"
  DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=16 DICE_ATTENTION_CONTEXTS=640,2560 \
    timeout 60 .device/$b --gtest_filter='CudaOps.AttentionTimings' 2>&1 | grep -E '^(model|1.7b|4b) '
done > "$OUT/call7-attention-timings.txt" 2>&1
cat "$OUT/call7-attention-timings.txt"
echo "timings took $((SECONDS - start)) s"
start=$SECONDS
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=110 \
  VARIANTS=';bin=.device/dice_new.xz' bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call7-variants-16.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call7-variants-16.jsonl"
grep -A6 "mean tokens" "$OUT/call7-variants-16.txt"
echo "variants took $((SECONDS - start)) s"
