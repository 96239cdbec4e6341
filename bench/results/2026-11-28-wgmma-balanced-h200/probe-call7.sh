#!/usr/bin/env bash
# Call 7: the wgmma kernel with 128 k a stage (two 64-k boxes of x and w per stage: one wait,
# block barrier and refill per 128 k): checks, per-launch times at 64 rows against 64 k a stage
# and cuBLASLt (with SDAR-4B's up projection alone, 2,560 -> 9,728: the down projection's bytes
# with short rows), then SDAR-4B tokens/s at 16 x 1,024.
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests
CHECK_LIMIT=150 CHECK_TESTS='CudaOps.Wgmma*:CudaBackendTest.WgmmaGemm*' bash bench/device_engine_check.sh tests > /dev/null 2>&1
cp "$OUT/engine-check.txt" "$OUT/call7-check-tests.txt" 2>/dev/null
grep -E "PASS|FAIL" "$OUT/call7-check-tests.txt" | tail -8
for shape in "4b down" "4b up" "4b gate_up" "4b o" "4b qkv" "1.7b down" "1.7b gate_up" "1.7b qkv"; do
  only=1; [ "$shape" = "4b up" ] || [ "$shape" = "4b down" ] && only=
  ( [ -n "$only" ] && export DICE_SKINNY_WGMMA_ONLY=1
    DICE_SKINNY_TIMINGS=1 DICE_SKINNY_ROWS=64 DICE_SKINNY_SHAPE="$shape" DICE_SKINNY_WGMMA_STAGE_K=64,128 \
    timeout 100 .device/dice_engine_cuda_tests --gtest_filter=CudaOps.SkinnyGemmTimings 2>&1 | grep -vE '^\[|^Note|^$|^Running|^shape' | grep -E "cublaslt|wgmma|copy" )
done > "$OUT/call7-timings-64.txt"
cat "$OUT/call7-timings-64.txt"
grep -q "FAIL" "$OUT/call7-check-tests.txt" && { echo "checks failed: no variants"; exit 0; }
start=$SECONDS
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=150 \
  VARIANTS=';--wgmma-stage-k 128;--wgmma-stage-k 128 --wgmma-min-block-k 0' \
  bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call7-variants-4b-16.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call7-variants-4b-16.jsonl"
grep -A8 "mean tokens" "$OUT/call7-variants-4b-16.txt"
echo "variants took $((SECONDS - start)) s"
