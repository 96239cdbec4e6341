#!/usr/bin/env bash
# Call 4: SDAR-4B's skinny o projection (which lets the next kernel start only as its blocks
# exit) triggers the post RMSNorm before or after its own wait (experiment commit,
# DICE_EXP_O_TRIGGER=1 / 2 through .device/dice_o1 and .device/dice_o2, two-line wrappers), so
# that the norm's launch is hidden; the timeline put the norm's start 0.27 us after o's end.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call4
printf '#!/bin/bash\nDICE_EXP_O_TRIGGER=1 exec "$(dirname "$0")/dice" "$@"\n' >.device/dice_o1
printf '#!/bin/bash\nDICE_EXP_O_TRIGGER=2 exec "$(dirname "$0")/dice" "$@"\n' >.device/dice_o2
chmod +x .device/dice_o1 .device/dice_o2
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=250 probe_variants \
  o-trigger ' ;bin=.device/dice_o1;bin=.device/dice_o2'
