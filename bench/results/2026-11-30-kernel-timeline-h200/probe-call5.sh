#!/usr/bin/env bash
# Call 5: the kept form at SDAR-4B 1 x 1,024 against the base build (bd07a46), one round each
# (the session's device time ends here).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call5
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=1 VARIANTS_LIMIT=100 probe_variants \
  norm-trigger-kept-4b 'bin=.device/dice_base; '
