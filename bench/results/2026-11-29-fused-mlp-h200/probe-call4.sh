#!/usr/bin/env bash
# Call 4: is it the 4 SMs that the separate down launch (128 tiles, 128 blocks) leaves free?
# The MLP launch on 128 blocks (DICE_MLP_SPARE_SMS=4, an experiment build) against
# --no-fused-mlp, SDAR-1.7B at 1 sequence.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call4
export DICE_MLP_SPARE_SMS=4
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=300 \
  probe_variants mlp-spare4 ' ;--no-fused-mlp'
