#!/usr/bin/env bash
# Call 5: the wgmma blocks capped at two stages (--wgmma-max-stages 2; the stage rule gives the
# 16-sequence SDAR-1.7B shapes three): its bit test, then tokens/s at 16 x 1,024 (both models) and
# SDAR-1.7B 16 x 4,096 unfused, two alternating rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call5
probe_unpack_tests
probe_checks 60 'CudaOps.WgmmaGemmStageCap*' || exit 1
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=200 \
  probe_variants stages-16 ' ;--wgmma-max-stages 2'
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=4096 STORE=unfused REPEATS=2 VARIANTS_LIMIT=150 \
  probe_variants stages-16x4096-unfused ' ;--wgmma-max-stages 2'
