#!/usr/bin/env bash
# Call 4: early attention pages (the deep kernel's first K/V pages below kv_fixed before its PDL
# wait): GPU tests, tokens/s at 16 sequences against the defaults and the base build (1ae31ca).
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests
start=$SECONDS
CHECK_LIMIT=150 CHECK_TESTS='CudaBackendTest.Early*:CudaBackendTest.Programmatic*:CudaBackendTest.DeepAndPaired*:CudaBackendTest.LogitsMatch*:CudaBackendTest.Graphs*:CudaOps.Attention*' \
  bash bench/device_engine_check.sh tests > /dev/null 2>&1
cp "$OUT/engine-check.txt" "$OUT/call4-check-tests.txt"
grep -c '^PASS' "$OUT/call4-check-tests.txt"; grep -E '^(FAIL|SKIP)' "$OUT/call4-check-tests.txt" | cut -c1-400 | head -20
echo "tests took $((SECONDS - start)) s"
start=$SECONDS
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=150 \
  VARIANTS=';--early-attention-pages;bin=.device/dice_base.xz' bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call4-variants-16.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call4-variants-16.jsonl"
grep -A8 "mean tokens" "$OUT/call4-variants-16.txt"
echo "variants took $((SECONDS - start)) s"
start=$SECONDS
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=120 \
  VARIANTS=';--early-attention-pages' bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call4-variants-4b-16x4096.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call4-variants-4b-16x4096.jsonl"
grep -A8 "mean tokens" "$OUT/call4-variants-4b-16x4096.txt"
echo "variants took $((SECONDS - start)) s"
