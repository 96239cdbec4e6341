#!/usr/bin/env bash
# Call 3: the wgmma split rule with a target of two blocks a SM (--wgmma-split-blocks-per-sm 2):
# per-launch times of every split count 1..8 at 64 rows (tile_n 64) on the SDAR o, gate/up and
# down shapes, then tokens/s at 16 x 1,024 (both models) and SDAR-1.7B 16 x 4,096 unfused.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call3
probe_unpack_tests
probe_checks 60 'WgmmaGemmRule.*:CudaOps.WgmmaMinBlockK*' || exit 1
DICE_SKINNY_WGMMA_ONLY=1 DICE_SKINNY_ROWS=64 DICE_SKINNY_WGMMA_TILES=64 DICE_SKINNY_WGMMA_PDL=1 \
  probe_timings splits '1.7b o' '1.7b gate_up' '1.7b down' '4b o' '4b gate_up' '4b down'
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=200 \
  probe_variants splits-16 ' ;--wgmma-split-blocks-per-sm 2'
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=4096 STORE=unfused REPEATS=2 VARIANTS_LIMIT=200 \
  probe_variants splits-16x4096 ' ;--wgmma-split-blocks-per-sm 2'
