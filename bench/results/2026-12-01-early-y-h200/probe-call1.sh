#!/usr/bin/env bash
# Call 1 (experiment commit): the few-row GEMMs' old outputs (o and down, adding into the
# residual) read before their programmatic wait: the backend's CPU-reference, seeded-sampling and
# graph tests with both switches on, then tokens/s at 1 x 1,024 on SDAR-1.7B and SDAR-4B:
# defaults, the streaming kernel's early read (DICE_EXP_EARLY_Y), and both kernels'.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
probe_unpack_tests
PROBE=call1
DICE_EXP_EARLY_Y=1 DICE_EXP_EARLY_Y_SKINNY=1 probe_checks 90 \
  'CudaBackendTest.LogitsMatchTheCpuReference:CudaBackendTest.SeededSamplingReproducesRunToRun:CudaBackendTest.GraphsAndChunkedPrefillDoNotChangeLogits' || exit 1
probe_env_wrapper dice_y 'DICE_EXP_EARLY_Y=1'
probe_env_wrapper dice_yy 'DICE_EXP_EARLY_Y=1 DICE_EXP_EARLY_Y_SKINNY=1'
V=' ;bin=.device/dice_y;bin=.device/dice_yy'
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=200 probe_variants early-y-1.7b "$V"
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=230 probe_variants early-y-4b "$V"
