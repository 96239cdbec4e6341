#!/usr/bin/env bash
# Call 5: the split walk whatever the fill (the saving rule alone), so that
# --stream-gemm-min-fill 0.6 streams SDAR-4B's o projection on whole tiles while its down
# projection stays split: SDAR-4B 1 x 1,024 side by side.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call5
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=150 \
  probe_variants o-stream-4b ' ;--stream-gemm-min-fill 0.6'
