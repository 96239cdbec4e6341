#!/usr/bin/env bash
# Call 3 (experiment commit): the wgmma GEMM's old y read before its programmatic wait (o and down
# at 17-64 rows, DICE_EXP_WGMMA_EARLY_Y): the wgmma op tests and the backend's wgmma and folded-norm
# CPU-reference tests with it on, then tokens/s against the code without it (its epilogue loop is
# unrolled either way) at SDAR-1.7B 16 x 4,096 (both store modes) and 16 x 1,024 on both models.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
probe_unpack_tests
PROBE=call3
DICE_EXP_WGMMA_EARLY_Y=1 probe_checks 100 'CudaOps.Wgmma*:CudaOps.Folded*:CudaBackendTest.WgmmaGemmLogitsMatchTheCpuReference:CudaBackendTest.FoldedNormsMatchTheCpuReference' || exit 1
probe_env_wrapper dice_wy 'DICE_EXP_WGMMA_EARLY_Y=1'
V=' ;bin=.device/dice_wy'
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=4096 STORE=fused,unfused REPEATS=2 VARIANTS_LIMIT=170 probe_variants 1.7b-16-4096 "$V"
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=110 probe_variants 16-1024 "$V"
