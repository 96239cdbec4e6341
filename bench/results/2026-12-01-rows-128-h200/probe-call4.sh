#!/usr/bin/env bash
# Call 4: the q/k norm + RoPE with several vectors a warp (experiment commit): the op tests with
# 2, 3 and 4 vectors a warp forced (DICE_EXP_QK_VECTORS), the backend's bit and CPU-reference
# tests with 3 and 4 forced, then tokens/s at 128 x 1,024: one vector a warp (the code before),
# 3, and the rule (4 at 512 rows).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
probe_unpack_tests
for n in 2 3 4; do
  PROBE=call4-qk$n
  DICE_EXP_QK_VECTORS=$n probe_checks 60 'CudaOps.QkNormRope*' || exit 1
done
for n in 3 4; do
  PROBE=call4-backend-qk$n
  DICE_EXP_QK_VECTORS=$n probe_checks 120 \
    'CudaBackendTest.BaselineAndDefaultKernelsGiveTheSameBf16*:CudaBackendTest.LogitsMatchTheCpuReference:CudaBackendTest.FoldedNormsMatchTheCpuReference:CudaBackendTest.ProgrammaticLaunchChangesNoBits' || exit 1
done
PROBE=call4
probe_env_wrapper dice_qk1 'DICE_EXP_QK_VECTORS=1'
probe_env_wrapper dice_qk3 'DICE_EXP_QK_VECTORS=3'
MODELS=4b,1.7b SEQUENCES=128 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=420 probe_variants qk-128 \
  'bin=.device/dice_qk1; ;bin=.device/dice_qk3'
