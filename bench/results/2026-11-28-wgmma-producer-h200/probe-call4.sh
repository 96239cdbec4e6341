#!/usr/bin/env bash
# Call 4: prefetch.tensormap of both tensor maps at the wgmma kernel's start against the build
# without it (.device/dice_base.xz, .device/tests_base.xz: the same tree before the prefetch):
# the wgmma checks, per-launch times at 64 rows (tile 64, 128 k a stage, block barrier; two
# rounds each, alternating), SDAR-4B tokens/s at 16 x 1,024 and 16 x 4,096.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call4
probe_unpack_tests
probe_checks 120 'CudaOps.Wgmma*' || { echo "checks failed"; exit 0; }
xz -dc .device/tests_base.xz > .device/tests_base && chmod +x .device/tests_base
shapes=("4b gate_up" "4b down" "4b qkv" "4b o" "1.7b gate_up" "1.7b down" "1.7b qkv" "1.7b o")
for round in 1 2; do
  for which in base new; do
    t=.device/dice_engine_cuda_tests; [ $which = base ] && t=.device/tests_base
    PROBE_TESTS=$t DICE_SKINNY_WGMMA_ONLY=1 DICE_SKINNY_ROWS=64 DICE_SKINNY_WGMMA_TILES=64 \
      DICE_SKINNY_WGMMA_STAGE_K=128 probe_timings "64-$which-$round" "${shapes[@]}" > /dev/null
  done
done
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=170 \
  probe_variants 4b-16 'bin=.device/dice_base.xz;'
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=130 \
  probe_variants 4b-16x4096 'bin=.device/dice_base.xz;'
