#!/usr/bin/env bash
# Call 11: EXPERIMENT, SDAR-4B 16 x 4,096 with the deep paired kernel at 8 warps from 1,536
# positions and from 0, against 4 warps from 1,536 (one round, alternating, same binary).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call11
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=1 VARIANTS_LIMIT=150 probe_variants 4b-16x4096 "--deep-attention-pairs-warps 8;--deep-attention-pairs-warps 8 --deep-attention-pairs-min-keys 0;"
