#!/usr/bin/env bash
# Call 1: the RMSNorm's trigger right after its programmatic wait (experiment commit, env
# DICE_EXP_*_NORM_TRIGGER=2 through .device/dice_pw and .device/dice_iw_pw, two-line wrappers
# around the experiment build, whose default is the kept code's).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call1
printf '#!/bin/bash\nDICE_EXP_POST_NORM_TRIGGER=2 exec "$(dirname "$0")/dice" "$@"\n' >.device/dice_pw
printf '#!/bin/bash\nDICE_EXP_INPUT_NORM_TRIGGER=2 DICE_EXP_POST_NORM_TRIGGER=2 exec "$(dirname "$0")/dice" "$@"\n' >.device/dice_iw_pw
chmod +x .device/dice_pw .device/dice_iw_pw
MODELS=4b,1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=540 probe_variants \
  norm-trigger-wait ' ;bin=.device/dice_pw;bin=.device/dice_iw_pw'
