#!/usr/bin/env bash
# Call 7: the defaults of 00d6962 (the q/k epilogue off; the other wgmma kernels' SASS 8-16
# instructions shorter after the split sum became a lambda) against the base (3c9c511) at
# 16 x 1,024, two rounds: no regression in the default path.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call7
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=150 \
  probe_variants defaults-16 'bin=.device/dice_base;'
