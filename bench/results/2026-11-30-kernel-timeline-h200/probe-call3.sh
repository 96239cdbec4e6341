#!/usr/bin/env bash
# Call 3: which RMSNorm should let the next kernel start before its own wait (experiment d12884a,
# DICE_NORM_EARLY_TRIGGER through .device/dice_input and .device/dice_both, two-line
# wrappers): call 2's timelines of SDAR-1.7B put the gain on qkv (after the input norm) and a loss
# on gate/up (after the post norm). Base: bd07a46's build.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call3
MODELS=1.7b,4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=440 probe_variants \
  norm-trigger-sites 'bin=.device/dice_base;bin=.device/dice_input;bin=.device/dice_both'
