#!/usr/bin/env bash
# Call 6: the q/k epilogue (call 5's kernel, now off by default) at issue 6's closest row,
# SDAR-1.7B 16 x 4,096 unfused: --fused-qk-norm-rope against the default, one binary, two rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call6
STORE=unfused MODELS=1.7b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=230 \
  probe_variants qk-1.7b-4096 ';--fused-qk-norm-rope'
