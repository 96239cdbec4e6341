#!/usr/bin/env bash
# Call 6: the wgmma kernel's fixed cost a launch with and without programmatic launches (early
# weights, as in the engine), at 64 rows, tile 64, 128 k a stage, the rule's split; cuBLASLt
# beside it. Two rounds, alternating.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call6
probe_unpack_tests
shapes=("4b gate_up" "4b up" "4b down" "4b qkv" "4b o" "1.7b gate_up" "1.7b down" "1.7b qkv" "1.7b o")
for round in 1 2; do
  DICE_SKINNY_ROWS=64 DICE_SKINNY_WGMMA_TILES=64 probe_timings "64-plain-$round" "${shapes[@]}" > /dev/null
  DICE_SKINNY_WGMMA_PDL=1 DICE_SKINNY_WGMMA_ONLY=1 DICE_SKINNY_ROWS=64 DICE_SKINNY_WGMMA_TILES=64 \
    probe_timings "64-pdl-$round" "${shapes[@]}" > /dev/null
done
grep -h "\*" "$OUT"/call6-timings-64-*-1.txt
