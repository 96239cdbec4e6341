#!/usr/bin/env bash
# Call 8: does SDAR-1.7B's attention queue behind its o projection's early weights too? Its o runs
# on the streaming kernel: 128 blocks each fill one 64 KiB stage (16 rows of 4 KiB bulk copies)
# before the wait, 8.4 MB at once. Experiment commit: DICE_EXP_O_EARLY_STAGES=0 (no early fill
# for o), =104 / =108 (4 / 8 of the stage's 16 rows before the wait, the rest after), through
# two-line wrappers. SDAR-1.7B 1 x 1,024, two rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call8
w() { printf '#!/bin/bash\n%s exec "$(dirname "$0")/dice" "$@"\n' "$2" >".device/$1"; chmod +x ".device/$1"; }
w dice_e0 DICE_EXP_O_EARLY_STAGES=0
w dice_r4 DICE_EXP_O_EARLY_STAGES=104
w dice_r8 DICE_EXP_O_EARLY_STAGES=108
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=150 probe_variants o-early-1.7b \
  ' ;bin=.device/dice_e0;bin=.device/dice_r4;bin=.device/dice_r8'
