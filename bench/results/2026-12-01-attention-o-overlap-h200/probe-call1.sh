#!/usr/bin/env bash
# Call 1: at 1 sequence, is the attention slowed by the o projection's staging (21 MB of cp.async
# issued at once by SDAR-4B's 160 o blocks while the latency-bound attention reads its pages)?
# Experiment commit: DICE_EXP_DEEP_ALL=1 (the deep attention, three pages in flight per warp, at 1
# sequence: every page requested right after the wait) and DICE_EXP_STAGE_BATCH=N (the o staging
# drained every N rounds per warp: fewer bytes in flight), each through a two-line wrapper; and
# finer splits (every warp one page) by options.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call1
w() { printf '#!/bin/bash\n%s exec "$(dirname "$0")/dice" "$@"\n' "$2" >".device/$1"; chmod +x ".device/$1"; }
w dice_deep DICE_EXP_DEEP_ALL=1
w dice_sb2 DICE_EXP_STAGE_BATCH=2
w dice_sb4 DICE_EXP_STAGE_BATCH=4
w dice_sb6 DICE_EXP_STAGE_BATCH=6
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=520 probe_variants overlap-4b \
  ' ;--no-stage-o-weights;--attention-min-split-keys 128 --attention-max-splits 16;bin=.device/dice_deep;bin=.device/dice_sb2;bin=.device/dice_sb4;bin=.device/dice_sb6'
