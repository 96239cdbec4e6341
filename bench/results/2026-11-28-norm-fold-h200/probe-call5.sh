#!/usr/bin/env bash
# Call 5: early weights only for short wgmma blocks (--wgmma-early-weights-max-block-k): tokens/s
# at 16 sequences with both norm folds (defaults): unlimited (default), 2,048 (SDAR-4B gate/up
# 2,560 and down 2,432 wait first, o 1,024 early), 1,024 (SDAR-1.7B: gate/up 2,048 and down 1,536
# wait, o 512 early), 0 (none early); same binary, alternating rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call5
e=--wgmma-early-weights-max-block-k
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=150 probe_variants 4b-16 ";$e 2048;$e 0"
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=100 probe_variants 1.7b-16 ";$e 1024;$e 0"
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=1 VARIANTS_LIMIT=150 probe_variants 4b-16x4096 ";$e 2048"
