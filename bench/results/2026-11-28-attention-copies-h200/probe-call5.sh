#!/usr/bin/env bash
# Call 5: the deep attention kernel for two waves of tiles with long KV ranges
# (--deep-attention-min-keys): per-launch crossover at 16 sequences, the new backend test, and
# SDAR-4B 16 x 4,096 tokens/s with the option at 1,024 and 2,048 keys against the default.
set -uo pipefail
cd "$(dirname "$0")/.."
rm -f .device/dice_engine_cuda_tests .device/tests_new
for b in tests_new; do
  [ -x .device/$b ] || { xz -dc .device/$b.xz > .device/$b && chmod +x .device/$b; }
done
source bench/common_device.sh
source bench/engine_device.sh
start=$SECONDS
{ machine_header; DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=16 DICE_ATTENTION_CONTEXTS=640,1024,1536,2048,3072,4160 \
  timeout 100 .device/tests_new --gtest_filter='CudaOps.AttentionTimings' 2>&1 | grep -E '^(model|1.7b|4b|attention) ';
  timeout 60 .device/tests_new --gtest_filter='CudaBackendTest.DeepAndPaired*' --gtest_brief=1 2>&1 | tail -4; } > "$OUT/call5-timings-test.txt" 2>&1
cat "$OUT/call5-timings-test.txt"
echo "timings and test took $((SECONDS - start)) s"
start=$SECONDS
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=270 \
  VARIANTS='bin=.device/dice_new.xz;bin=.device/dice_new.xz --deep-attention-min-keys 1024;bin=.device/dice_new.xz --deep-attention-min-keys 2048' \
  bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call5-variants-4b-16-4096.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call5-variants-4b-16-4096.jsonl"
grep -B30 -A6 "mean tokens" "$OUT/call5-variants-4b-16-4096.txt" | tail -12
echo "variants took $((SECONDS - start)) s"
