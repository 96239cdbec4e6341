#!/usr/bin/env bash
# Call 2: the wgmma kernel's balanced launch (stream-K, no clusters): its checks, per-launch times
# at 64 rows next to the cluster launch and cuBLASLt, and tokens/s at 16 x 1,024.
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests
start=$SECONDS
CHECK_LIMIT=150 CHECK_TESTS='CudaOps.Wgmma*:CudaBackendTest.WgmmaGemm*' bash bench/device_engine_check.sh tests > /dev/null 2>&1
cp "$OUT/engine-check.txt" "$OUT/call2-check-tests.txt" 2>/dev/null
grep -E "PASS|FAIL|OK \]|FAILED" "$OUT/call2-check-tests.txt" | tail -8
echo "checks took $((SECONDS - start)) s"
start=$SECONDS
source bench/common_device.sh >/dev/null 2>&1
for shape in "4b down" "4b gate_up" "4b o" "4b qkv" "1.7b down" "1.7b gate_up" "1.7b o" "1.7b qkv"; do
  DICE_SKINNY_TIMINGS=1 DICE_SKINNY_ROWS=64 DICE_SKINNY_SHAPE="$shape" \
    timeout 100 .device/dice_engine_cuda_tests --gtest_filter=CudaOps.SkinnyGemmTimings 2>&1 | grep -vE '^\[|^Note|^$|^Running|^shape' | grep -E "cublaslt|balanced|\*|copy"
done > "$OUT/call2-timings-64.txt"
cat "$OUT/call2-timings-64.txt"
echo "timings took $((SECONDS - start)) s"
grep -q "FAILED\|FAIL:" "$OUT/call2-check-tests.txt" && { echo "checks failed: no variants"; exit 0; }
start=$SECONDS
MODELS=4b,1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=280 \
  VARIANTS=';--wgmma-balanced 1;--wgmma-balanced 2;--wgmma-balanced 1 --wgmma-min-block-k 0;--wgmma-balanced 2 --wgmma-min-block-k 0' \
  bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call2-variants-16.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call2-variants-16.jsonl"
grep -A12 "mean tokens" "$OUT/call2-variants-16.txt"
echo "variants took $((SECONDS - start)) s"
