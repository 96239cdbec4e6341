#!/usr/bin/env bash
# Call 4: the attention's page copies at fixed offsets from one address per lane: tests, per
# launch times against the base build (ABAB), tokens/s at 16 and 128 sequences.
set -uo pipefail
cd "$(dirname "$0")/.."
for b in dice_engine_cuda_tests tests_new; do
  [ -x .device/$b ] || { xz -dc .device/$b.xz > .device/$b && chmod +x .device/$b; }
done
source bench/common_device.sh
source bench/engine_device.sh
start=$SECONDS
{ machine_header; timeout 150 .device/tests_new --gtest_filter='CudaOps.Attention*:CudaBackendTest.*' --gtest_brief=1 2>&1 | tail -15; } > "$OUT/call4-tests-new.txt" 2>&1
tail -6 "$OUT/call4-tests-new.txt"
echo "tests took $((SECONDS - start)) s"
start=$SECONDS
for round in 1 2; do
  for b in dice_engine_cuda_tests tests_new; do
    echo "## $b round $round"
    DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=1,16,128 DICE_ATTENTION_CONTEXTS=640,2560 \
      timeout 100 .device/$b --gtest_filter='CudaOps.AttentionTimings' 2>&1 | grep -E '^(model|1.7b|4b) '
  done
done > "$OUT/call4-attention-timings.txt" 2>&1
cat "$OUT/call4-attention-timings.txt"
echo "timings took $((SECONDS - start)) s"
run() {  # run NAME MODELS SEQUENCES LIMIT
  MODELS=$2 SEQUENCES=$3 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=$4 \
    VARIANTS=';bin=.device/dice_new.xz' bash bench/device_engine_variants.sh > /dev/null 2>&1
  cp "$OUT/engine-variants.txt" "$OUT/$1.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/$1.jsonl"
  grep -A6 "mean tokens" "$OUT/$1.txt"
}
run call4-variants-16 1.7b,4b 16 130
run call4-variants-128 1.7b 128 90
