#!/usr/bin/env bash
# Call 1: the GPU tests of 6f4a4e1/740885d (the TMA pages experiment and the review mend), the
# deep kernel's per-launch times with and without TMA pages, tokens/s at 16 sequences.
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests
start=$SECONDS
CHECK_LIMIT=200 CHECK_TESTS='CudaOps.*:CudaBackendTest.*' bash bench/device_engine_check.sh tests > /dev/null 2>&1
cp "$OUT/engine-check.txt" "$OUT/call1-check-tests.txt"
grep -c '^PASS' "$OUT/call1-check-tests.txt"; grep -v '^PASS' "$OUT/call1-check-tests.txt" | head -20
echo "tests took $((SECONDS - start)) s"
start=$SECONDS
for round in 1 2; do
  echo "## round $round"
  DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=16,128 DICE_ATTENTION_CONTEXTS=640,2560 \
    timeout 90 .device/dice_engine_cuda_tests --gtest_filter='CudaOps.AttentionTimings' 2>&1 | grep -vE '^\[|^Note|^$'
done > "$OUT/call1-attention-timings.txt" 2>&1
cat "$OUT/call1-attention-timings.txt"
echo "timings took $((SECONDS - start)) s"
start=$SECONDS
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=150 \
  VARIANTS=';--tma-attention-pages' bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call1-variants-16.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call1-variants-16.jsonl"
grep -A8 "mean tokens" "$OUT/call1-variants-16.txt"
echo "variants took $((SECONDS - start)) s"
