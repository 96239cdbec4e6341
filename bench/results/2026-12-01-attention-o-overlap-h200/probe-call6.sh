#!/usr/bin/env bash
# Call 6: call 5's early read of the old outputs in the skinny kernel only (SDAR-4B's o
# projection at 1 sequence); the streaming kernel's (0.976 on SDAR-1.7B in call 5) left out.
# Uncommitted build (.device/dice) against a3d5232 (.device/dice_base).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call6
MODELS=4b,1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=200 probe_variants \
  early-y-skinny 'bin=.device/dice_base; '
