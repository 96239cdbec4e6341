#!/usr/bin/env bash
# Call 2: the wgmma kernel with more stages than the rule's (4-7 of 128 k: one block a SM where
# two no longer fit), block barrier and producer warp, at 64 rows, tile 64, every split.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
DICE_SKINNY_ROWS=64 DICE_SKINNY_WGMMA_TILES=64 DICE_SKINNY_WGMMA_STAGE_K=128 DICE_SKINNY_WGMMA_PIPELINE=0,1 \
  DICE_SKINNY_WGMMA_STAGES=0,4,5,7 \
  probe_timings 64 "4b qkv" "4b o" "4b down" "1.7b qkv" "1.7b o" "1.7b down" "4b up" "4b gate_up" > /dev/null
echo done
