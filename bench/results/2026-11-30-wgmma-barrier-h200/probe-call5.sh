#!/usr/bin/env bash
# Call 5: the wgmma kernel with accumulate asks L2 for its block's old y rows right after its
# programmatic wait (cp.async.bulk.prefetch.L2, one per row), so that the epilogue's y loads hit
# L2 (build P, on A3). Checks, then 16 x 1,024 against the A3 build.
set -uo pipefail
cd "$(dirname "$0")/../../.."
xz -dc .device/dice.xz > .device/dice && chmod +x .device/dice
source bench/device_probe_lib.sh
PROBE=call5
probe_unpack_tests
probe_checks 120 'CudaOps.Wgmma*:CudaBackendTest.WgmmaGemmLogits*:CudaBackendTest.FoldedNorms*' || exit 1
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=230 probe_variants prefetch-y-16 'bin=.device/dice_A3.xz;'
