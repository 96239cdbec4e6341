#!/usr/bin/env bash
# Call 6: the wgmma epilogue with every split's partial loaded before the sum and the old y / norm
# weight read under the k loop: checks, the per-block trace again (experiment tests binary), then
# 16 x 1,024 and 16 x 4,096 against the base build.
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice.xz > .device/dice && chmod +x .device/dice
source bench/device_probe_lib.sh
PROBE=call6
probe_unpack_tests
probe_checks 240 'CudaOps.Wgmma*:CudaBackendTest.Wgmma*:CudaBackendTest.FoldedNorms*:CudaBackendTest.LogitsMatchTheCpuReference' || exit 1
PROBE_TESTS=.device/trace/dice_engine_cuda_tests probe_unpack_tests
for shape in '1.7b o' '1.7b down' '1.7b gate_up' '4b o' '4b down'; do
  DICE_SKINNY_TIMINGS=1 DICE_SKINNY_SHAPE="$shape" DICE_SKINNY_ROWS=64 DICE_SKINNY_WGMMA_ONLY=1 \
    DICE_SKINNY_WGMMA_PDL=1 DICE_SKINNY_WGMMA_TILES=64 DICE_SKINNY_WGMMA_SPLITS=1,4 \
    DICE_WGMMA_TRACE=1 timeout 120 .device/trace/dice_engine_cuda_tests --gtest_filter=CudaOps.SkinnyGemmTimings 2>&1 |
    grep -E "wgmma|trace|copy"
done | tee "$OUT/$PROBE-wgmma-trace.txt"
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=300 probe_variants epilogue-16 ' ;bin=.device/dice_base.xz'
