#!/usr/bin/env bash
# Call 8: the kernel timeline of SDAR-1.7B at 1 sequence with call 7's stream fold
# (DICE_EXP_STREAM_FOLD=1 for the whole run): where the input norm's step went.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call8
export DICE_EXP_STREAM_FOLD=1
CONFIGS='1.7b:1' NEW_TOKENS=256 PASSES=200 timeout 150 bash bench/device_kernel_timeline.sh \
  >/dev/null 2>&1
for f in "$OUT"/timeline*; do mv "$f" "$OUT/call8-${f##*/}"; done
grep -B2 -A14 "one layer" "$OUT/call8-timeline.txt"
