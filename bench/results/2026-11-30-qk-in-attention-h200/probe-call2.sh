#!/usr/bin/env bash
# Call 2: --qk-in-attention against the new build's defaults where its prologue is one round
# (unfused store: 16 jobs a block of 4 warps) at SDAR-1.7B 16 x 4,096 (the row at 1.5x), and
# at one sequence (the pipelined kernel, split) at SDAR-4B 1 x 1,024.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call2
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=4096 STORE=unfused REPEATS=2 VARIANTS_LIMIT=300 \
  probe_variants qk-1.7b-16-4096-unfused ' ;--qk-in-attention'
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=250 probe_variants qk-4b-1 \
  ' ;--qk-in-attention'
