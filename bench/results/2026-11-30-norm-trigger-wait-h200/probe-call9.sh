#!/usr/bin/env bash
# Call 9: at 16 sequences, the qkv projection on the wgmma kernel instead of cuBLASLt (experiment
# commit, DICE_EXP_WGMMA_QKV=1 through .device/dice_wq, a two-line wrapper), lm_head left to the
# block-k rule. The wgmma-barrier folder's --wgmma-min-block-k 1024 moved both (SDAR-1.7B 0.982,
# SDAR-4B 1.006); the old timeline shows cuBLASLt's qkv 7.89 us a layer for 16.8 MB at SDAR-1.7B,
# starting 0.5 us after down ends.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call9
printf '#!/bin/bash\nDICE_EXP_WGMMA_QKV=1 exec "$(dirname "$0")/dice" "$@"\n' >.device/dice_wq
chmod +x .device/dice_wq
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=220 probe_variants \
  wgmma-qkv ' ;bin=.device/dice_wq'
