#!/usr/bin/env bash
# Call 2: the wgmma GEMM's x multicast across column-tile pairs (--wgmma-multicast-x): the tests
# that compare its bits, per-launch times at 64 rows on the SDAR MLP and o shapes with and without
# it, then tokens/s at 16 x 1,024 on both models.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
probe_checks 150 'WgmmaGemmRule.*:CudaOps.WgmmaGemm*:CudaBackendTest.WgmmaMulticast*:CudaBackendTest.FoldedNorms*' || exit 1
DICE_SKINNY_WGMMA_MULTICAST=1 DICE_SKINNY_WGMMA_ONLY=1 DICE_SKINNY_ROWS=64 DICE_SKINNY_WGMMA_TILES=64,128 \
  DICE_SKINNY_WGMMA_SPLITS=1,2,4 DICE_SKINNY_WGMMA_PDL=1 \
  probe_timings mc '1.7b o' '1.7b gate_up' '1.7b down' '4b o' '4b gate_up' '4b down'
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=250 \
  probe_variants mc-16 ' ;--wgmma-multicast-x'
