#!/usr/bin/env bash
# Call 1: every GPU test of this build (the backend test now runs the deep paired prompt with 4
# and 8 warps a block); then SDAR-4B tokens/s at 16 x 4,096 and 16 x 1,024: the defaults (4
# warps from 1,536 positions) against 8 warps from 0 positions.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
start=$SECONDS
probe_checks 420 '*'
echo "checks took $((SECONDS - start)) s"
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=1 VARIANTS_LIMIT=150 probe_variants 4b-16x4096 ";--deep-attention-pairs-warps 8 --deep-attention-pairs-min-keys 0"
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=1 VARIANTS_LIMIT=80 probe_variants 4b-16 ";--deep-attention-pairs-warps 8 --deep-attention-pairs-min-keys 0"
