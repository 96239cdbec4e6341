#!/usr/bin/env bash
# Call 6: the gate/up GEMM on the streaming split walk wherever it saves any k (experiment commit,
# DICE_EXP_SPLIT_SWIGLU=1 through .device/dice_sw, a two-line wrapper). SDAR-4B's gate/up (1,216
# tiles on 132 blocks) runs whole tiles: its busiest block streams 25,600 k against 23,808 on the
# split walk (1,792 less, under kStreamSplitMinSavingK's 4,096); the timeline puts it at 28.1 us
# a layer for 23.5 us of bytes at the copy rate. SDAR-1.7B's saves 256 k.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call6
printf '#!/bin/bash\nDICE_EXP_SPLIT_SWIGLU=1 exec "$(dirname "$0")/dice" "$@"\n' >.device/dice_sw
chmod +x .device/dice_sw
MODELS=4b,1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=250 probe_variants \
  split-gate-up ' ;bin=.device/dice_sw'
