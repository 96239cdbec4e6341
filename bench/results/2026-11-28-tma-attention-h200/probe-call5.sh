#!/usr/bin/env bash
# Call 5: the skinny GEMM at 32 and 64 rows against cuBLASLt per SDAR layer shape on the H200,
# and --skinny-gemm-rows 64 in decoding at 16 sequences (64-row block passes).
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests
start=$SECONDS
DICE_SKINNY_TIMINGS=1 DICE_SKINNY_ROWS=32,64 timeout 120 .device/dice_engine_cuda_tests --gtest_filter=CudaOps.SkinnyGemmTimings 2>&1 | grep -vE '^\[|^Note|^$|^Running' > "$OUT/call5-skinny-timings-64.txt"
cat "$OUT/call5-skinny-timings-64.txt"
echo "timings took $((SECONDS - start)) s"
start=$SECONDS
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=130 \
  VARIANTS=';--skinny-gemm-rows 64' bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call5-variants-16.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call5-variants-16.jsonl"
grep -A8 "mean tokens" "$OUT/call5-variants-16.txt"
echo "variants took $((SECONDS - start)) s"
