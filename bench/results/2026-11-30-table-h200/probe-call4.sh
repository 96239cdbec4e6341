#!/usr/bin/env bash
# Call 4: the attention planner's split cost (--attention-split-cost, default 768, chosen at
# ~1,000 positions) at SDAR-1.7B 16 x 4,096, unfused store (1.517x the floor in call 3).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call4
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=4096 STORE=unfused REPEATS=2 VARIANTS_LIMIT=330 \
  probe_variants split-cost ' ;--attention-split-cost 0;--attention-split-cost 384;--attention-split-cost 1536'
