#!/usr/bin/env bash
# Call 3: SDAR-4B 128 x 1,024, the fused store passes' attention (paired tiles, 1/4 of the
# passes, ~1.5-2x a block-only pass's launch): unpaired, on the one-warp kernel, and the one-warp
# kernel at short contexts only (experiment commits).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call3
probe_env_wrapper dice_warp_all 'DICE_EXP_WARP_ITEMS=1 DICE_EXP_WARP_ITEMS_MAX=4096'
probe_env_wrapper dice_warp_all_short 'DICE_EXP_WARP_ITEMS=1 DICE_EXP_WARP_ITEMS_MAX=4096 DICE_EXP_WARP_ITEMS_MAX_KEYS=384'
probe_env_wrapper dice_warp_short 'DICE_EXP_WARP_ITEMS=1 DICE_EXP_WARP_ITEMS_MAX_KEYS=384'
MODELS=4b SEQUENCES=128 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=480 probe_variants paired-128 \
  ' ;--no-paired-attention-tiles;bin=.device/dice_warp_all;bin=.device/dice_warp_all_short;bin=.device/dice_warp_short'
