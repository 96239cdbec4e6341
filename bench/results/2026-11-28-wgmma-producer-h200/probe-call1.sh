#!/usr/bin/env bash
# Call 1: the wgmma kernel's producer-warp pipelines (a fifth warp refills each stage as the
# warpgroup's four warps release it; "overlap": one MMA group left in flight) against the block
# barrier: checks, per-launch times at 64 rows (tile 64, 64 and 128 k a stage, every split),
# then SDAR-4B tokens/s at 16 x 1,024.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 170 'CudaOps.Wgmma*:CudaBackendTest.WgmmaGemm*' || { echo "checks failed: no timings"; exit 0; }
DICE_SKINNY_ROWS=64 DICE_SKINNY_WGMMA_TILES=64 DICE_SKINNY_WGMMA_STAGE_K=64,128 DICE_SKINNY_WGMMA_PIPELINE=0,1,2 \
  probe_timings 64 "4b down" "4b gate_up" "4b o" "4b qkv" "1.7b down" "1.7b gate_up" "1.7b o" "1.7b qkv"
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=220 \
  probe_variants 4b-16 ';--wgmma-pipeline producer;--wgmma-pipeline overlap'
