#!/usr/bin/env bash
# Call 7: only the split partials loaded together before their sum (the rest of call 6's change
# left out): checks, per launch at 64 rows, then 16 x 1,024 against the base build.
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice.xz > .device/dice && chmod +x .device/dice
source bench/device_probe_lib.sh
PROBE=call7
probe_unpack_tests
probe_checks 200 'CudaOps.Wgmma*:CudaBackendTest.WgmmaGemmLogits*:CudaBackendTest.FoldedNorms*' || exit 1
DICE_SKINNY_ROWS=64 DICE_SKINNY_WGMMA_ONLY=1 DICE_SKINNY_WGMMA_PDL=1 DICE_SKINNY_WGMMA_TILES=64 \
  DICE_SKINNY_WGMMA_SPLITS=1,4 probe_timings wgmma-64 '1.7b o' '1.7b down' '4b o' '4b down'
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=240 probe_variants parts-16 ' ;bin=.device/dice_base.xz'
