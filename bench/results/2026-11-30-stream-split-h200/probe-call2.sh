#!/usr/bin/env bash
# Call 2: where the split walk's time goes (experiment switch DICE_EXP_SPLIT in the working tree):
# 0 as committed, 1 no hand-over (wrong sums: timing only), 2 one fence after the barrier instead
# of one per thread, 4 stage cuts on the tile's 2,048-k grid; per launch at 4 rows, then
# SDAR-4B 1 x 1,024 with modes 2 and 4 beside 0 and the split off.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
for m in 0 1 2 4; do
  DICE_EXP_SPLIT=$m DICE_SKINNY_ROWS=4 probe_timings mode$m '4b o' '4b down' | grep -E "split|skinny n2|stream pdl"
done
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=200 \
  probe_variants modes-4b ' ;--no-stream-gemm-split;bin=.device/dice_m2;bin=.device/dice_m4'
