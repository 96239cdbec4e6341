#!/usr/bin/env bash
# Call 2: the two that gained in call 1 (the deep attention at 1 sequence, the o staging drained
# every N rounds per warp), together and apart, on SDAR-4B and SDAR-1.7B at 1 x 1,024.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call2
w() { printf '#!/bin/bash\n%s exec "$(dirname "$0")/dice" "$@"\n' "$2" >".device/$1"; chmod +x ".device/$1"; }
w dice_deep DICE_EXP_DEEP_ALL=1
w dice_sb2 DICE_EXP_STAGE_BATCH=2
w dice_sb4 DICE_EXP_STAGE_BATCH=4
w dice_deep_sb2 "DICE_EXP_DEEP_ALL=1 DICE_EXP_STAGE_BATCH=2"
w dice_deep_sb4 "DICE_EXP_DEEP_ALL=1 DICE_EXP_STAGE_BATCH=4"
w dice_sb1 DICE_EXP_STAGE_BATCH=1
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=260 probe_variants both-4b \
  ' ;bin=.device/dice_sb1;bin=.device/dice_sb2;bin=.device/dice_deep_sb2;bin=.device/dice_deep_sb4'
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=260 probe_variants both-1.7b \
  ' ;bin=.device/dice_deep;bin=.device/dice_sb2;bin=.device/dice_sb4;bin=.device/dice_deep_sb2;bin=.device/dice_deep_sb4'
