#!/usr/bin/env bash
set -uo pipefail
cd "$(dirname "$0")/.."
for b in dice_base dice_vocab dice_engine_cuda_tests; do xz -dc .device/$b.xz > .device/$b && chmod +x .device/$b; done
source bench/common_device.sh
source bench/engine_device.sh
{ machine_header; timeout 150 "$TESTS" --gtest_filter='CudaOps.QkNormRope*:CudaOps.VocabPass*:CudaBackendTest.*' --gtest_brief=1 2>&1 | tail -15; } > "$OUT/tests.txt" 2>&1
cat "$OUT/tests.txt"
run() {  # run NAME MODELS SEQUENCES REPEATS LIMIT
  MODELS=$2 SEQUENCES=$3 NEW_TOKENS=1024 REPEATS=$4 VARIANTS='bin=.device/dice_base;bin=.device/dice_vocab;' VARIANTS_LIMIT=$5 \
    bash bench/device_engine_variants.sh > /dev/null 2>&1
  cp "$OUT/engine-variants.txt" "$OUT/$1.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/$1.jsonl"
  grep -A20 "mean tokens" "$OUT/$1.txt"
}
run variants-128 1.7b,4b 128 2 250
run variants-1 1.7b 1 2 100
run variants-16 1.7b 16 2 100
