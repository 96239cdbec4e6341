#!/usr/bin/env bash
# Call 2: the wgmma kernel's last cluster barrier as arrive.relaxed + wait (build A3: no release,
# so the threads no longer wait for their y stores to complete before arriving; the loop is as
# before). Checks, per launch at 64 rows under PDL (base, A3), then 16 x 1,024 against the base.
set -uo pipefail
cd "$(dirname "$0")/../../.."
xz -dc .device/dice.xz > .device/dice && chmod +x .device/dice
source bench/device_probe_lib.sh
for v in base A3; do PROBE_TESTS=.device/t$v/dice_engine_cuda_tests probe_unpack_tests; done
PROBE=call2
cp .device/tA3/dice_engine_cuda_tests .device/dice_engine_cuda_tests
probe_checks 120 'CudaOps.Wgmma*:CudaBackendTest.WgmmaGemmLogits*:CudaBackendTest.FoldedNorms*' || exit 1
for v in base A3; do
  DICE_SKINNY_ROWS=64 DICE_SKINNY_WGMMA_ONLY=1 DICE_SKINNY_WGMMA_PDL=1 DICE_SKINNY_WGMMA_TILES=64 \
    DICE_SKINNY_WGMMA_SPLITS=1,4 PROBE_TESTS=.device/t$v/dice_engine_cuda_tests \
    probe_timings "wgmma-64-$v" '1.7b o' '1.7b down' '1.7b gate_up' '4b o' '4b down'
done
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=230 probe_variants relaxed-16 'bin=.device/dice_base.xz;'
