#!/usr/bin/env bash
# Call 2: the RMSNorm kernel lets the next kernel start before its own programmatic wait
# (experiment), because call 1's timeline showed gate/up and qkv starting only ~0.15 us before
# the norm before them ends: SDAR-1.7B and SDAR-4B 1 x 1,024 against the base build (bd07a46),
# then the timelines of the experiment build (the injection library's exit fixed: 4b again).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call2
MODELS=1.7b,4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=330 probe_variants \
  norm-trigger 'bin=.device/dice_base; '
CONFIGS='4b:1 1.7b:1' NEW_TOKENS=256 PASSES=200 timeout 200 bash bench/device_kernel_timeline.sh
