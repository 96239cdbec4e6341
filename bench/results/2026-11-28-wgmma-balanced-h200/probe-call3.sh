#!/usr/bin/env bash
# Call 3: the balanced launch with the (tile, k block) walk by increments (no 64-bit division per
# stage) and 1-4 blocks a SM: checks, per-launch times at 64 rows, SDAR-4B tokens/s at 16 x 1,024.
# (The variants did not run: the check's "3 blocks a SM throws" expectation, left from call 2's
# limit of 2, failed; the launch itself passed.)
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests
start=$SECONDS
CHECK_LIMIT=150 CHECK_TESTS='CudaOps.Wgmma*:CudaBackendTest.WgmmaGemm*' bash bench/device_engine_check.sh tests > /dev/null 2>&1
cp "$OUT/engine-check.txt" "$OUT/call3-check-tests.txt" 2>/dev/null
grep -E "PASS|FAIL" "$OUT/call3-check-tests.txt" | tail -8
echo "checks took $((SECONDS - start)) s"
start=$SECONDS
for shape in "4b down" "4b gate_up" "4b o" "4b qkv" "1.7b down" "1.7b gate_up" "1.7b o" "1.7b qkv"; do
  DICE_SKINNY_TIMINGS=1 DICE_SKINNY_ROWS=64 DICE_SKINNY_SHAPE="$shape" \
    timeout 100 .device/dice_engine_cuda_tests --gtest_filter=CudaOps.SkinnyGemmTimings 2>&1 | grep -vE '^\[|^Note|^$|^Running|^shape' | grep -E "cublaslt|balanced|\*|copy"
done > "$OUT/call3-timings-64.txt"
cat "$OUT/call3-timings-64.txt"
echo "timings took $((SECONDS - start)) s"
grep -q "FAIL" "$OUT/call3-check-tests.txt" && { echo "checks failed: no variants"; exit 0; }
start=$SECONDS
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=150 \
  VARIANTS=';--wgmma-balanced 3 --wgmma-balanced-tile 64;--wgmma-balanced 4 --wgmma-balanced-tile 64;--wgmma-balanced 3' \
  bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call3-variants-4b-16.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call3-variants-4b-16.jsonl"
grep -A8 "mean tokens" "$OUT/call3-variants-4b-16.txt"
echo "variants took $((SECONDS - start)) s"
