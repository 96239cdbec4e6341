#!/usr/bin/env bash
# Call 8: SDAR-4B 16 x 4,096, both norm folds (defaults) against none, two rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call8
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=170 probe_variants 4b-16x4096 ';--no-fold-qkv-norm --no-fold-mlp-norm'
