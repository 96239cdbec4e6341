#!/usr/bin/env bash
# Call 1: the wgmma split-K epilogue's second cluster barrier split into its arrive (after the
# block's last remote read) and its wait (at the end), so that its release no longer waits for the
# y stores (build A); build A2 also loads every old y before the stores. Checks of both, per launch
# at 64 rows under PDL (base, A, A2), then 16 x 1,024 against the base build.
set -uo pipefail
cd "$(dirname "$0")/../../.."
xz -dc .device/dice.xz > .device/dice && chmod +x .device/dice
source bench/device_probe_lib.sh
for v in base A A2; do PROBE_TESTS=.device/t$v/dice_engine_cuda_tests probe_unpack_tests; done
for v in A2 A; do
  PROBE=call1-$v
  cp .device/t$v/dice_engine_cuda_tests .device/dice_engine_cuda_tests
  probe_checks 120 'CudaOps.Wgmma*:CudaBackendTest.WgmmaGemmLogits*:CudaBackendTest.FoldedNorms*' || exit 1
done
PROBE=call1
for v in base A A2; do
  t=.device/t$v/dice_engine_cuda_tests
  DICE_SKINNY_ROWS=64 DICE_SKINNY_WGMMA_ONLY=1 DICE_SKINNY_WGMMA_PDL=1 DICE_SKINNY_WGMMA_TILES=64 \
    DICE_SKINNY_WGMMA_SPLITS=1,4 PROBE_TESTS=$t probe_timings "wgmma-64-$v" '1.7b o' '1.7b down' '1.7b gate_up' '4b o' '4b down'
done
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=330 probe_variants barrier-16 'bin=.device/dice_base.xz;bin=.device/dice_A.xz;'
