#!/usr/bin/env bash
# Call 6: the attention's split cap at 1 sequence and 4,096 new tokens (default 8 against 16 and
# 32 ranges a tile), both models, two alternating rounds, on 060c69d's build.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call6
MODELS=4b,1.7b SEQUENCES=1 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=340 \
  probe_variants max-splits-1x4096 ' ;--attention-max-splits 16;--attention-max-splits 32'
