#!/usr/bin/env bash
# Call 6: how many balanced blocks each SM holds (occupancy API) with the default shared-memory
# carveout and with DICE_WGMMA_CARVEOUT=100 (the balanced kernels' preferred carveout set to all
# shared memory); per-launch times at 64 rows both ways; SDAR-4B tokens/s at 16 x 1,024 with it.
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests
for carveout in default 100; do
  echo "== carveout $carveout"
  for shape in "4b down" "4b gate_up" "4b o" "4b qkv" "1.7b down" "1.7b gate_up"; do
    ( [ $carveout = default ] || export DICE_WGMMA_CARVEOUT=$carveout
      DICE_SKINNY_TIMINGS=1 DICE_SKINNY_ROWS=64 DICE_SKINNY_SHAPE="$shape" DICE_SKINNY_WGMMA_ONLY=1 DICE_SKINNY_WGMMA_TILES=64 \
      timeout 100 .device/dice_engine_cuda_tests --gtest_filter=CudaOps.SkinnyGemmTimings 2>&1 | grep -vE '^\[|^Note|^$|^Running|^shape' | grep -E "balanced|\*" )
  done
done > "$OUT/call6-timings-64.txt"
cat "$OUT/call6-timings-64.txt"
start=$SECONDS
DICE_WGMMA_CARVEOUT=100 MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=150 \
  VARIANTS=';--wgmma-balanced 2 --wgmma-balanced-tile 64;--wgmma-balanced 3 --wgmma-balanced-tile 64' \
  bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call6-variants-4b-16.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call6-variants-4b-16.jsonl"
grep -A8 "mean tokens" "$OUT/call6-variants-4b-16.txt"
echo "variants took $((SECONDS - start)) s"
