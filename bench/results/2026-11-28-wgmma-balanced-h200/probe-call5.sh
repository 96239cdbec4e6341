#!/usr/bin/env bash
# Call 5: the balanced launch with one acq_rel count per shared tile by thread 0 (no
# __threadfence in every thread) and the partial slots read one ahead: checks, per-launch times
# at 64 rows, then SDAR-4B tokens/s at 16 x 1,024.
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests
CHECK_LIMIT=150 CHECK_TESTS='CudaOps.Wgmma*:CudaBackendTest.WgmmaGemm*:CudaOps.Attention*:-CudaOps.AttentionTimings' bash bench/device_engine_check.sh tests > /dev/null 2>&1
cp "$OUT/engine-check.txt" "$OUT/call5-check-tests.txt" 2>/dev/null
grep -E "PASS|FAIL" "$OUT/call5-check-tests.txt" | tail -12
for shape in "4b down" "4b gate_up" "4b o" "4b qkv" "1.7b down" "1.7b gate_up" "1.7b o" "1.7b qkv"; do
  DICE_SKINNY_TIMINGS=1 DICE_SKINNY_ROWS=64 DICE_SKINNY_SHAPE="$shape" DICE_SKINNY_WGMMA_ONLY=1 DICE_SKINNY_WGMMA_TILES=64 \
    timeout 100 .device/dice_engine_cuda_tests --gtest_filter=CudaOps.SkinnyGemmTimings 2>&1 | grep -vE '^\[|^Note|^$|^Running|^shape' | grep -E "balanced|\*|copy"
done > "$OUT/call5-timings-64.txt"
cat "$OUT/call5-timings-64.txt"
grep -q "FAIL" "$OUT/call5-check-tests.txt" && { echo "checks failed: no variants"; exit 0; }
start=$SECONDS
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=150 \
  VARIANTS=';--wgmma-balanced 2 --wgmma-balanced-tile 64;--wgmma-balanced 3 --wgmma-balanced-tile 64' \
  bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call5-variants-4b-16.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call5-variants-4b-16.jsonl"
grep -A8 "mean tokens" "$OUT/call5-variants-4b-16.txt"
echo "variants took $((SECONDS - start)) s"
