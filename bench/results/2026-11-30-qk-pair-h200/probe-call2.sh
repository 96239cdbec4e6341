#!/usr/bin/env bash
# Call 2 (experiment build, not committed): the wgmma kernel's y epilogue reads its old y
# (accumulate) and the fold's norm weight for a thread's first 4 outputs before the partials'
# stores and the first cluster barrier, not after it. Checks of the wgmma kernel and the folds,
# then tokens/s against the base (41f7d99's kernels, dice_base) at 16 x 1,024 and SDAR-1.7B
# 16 x 4,096 unfused.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
probe_checks 150 'CudaOps.Wgmma*:CudaBackendTest.Wgmma*:CudaBackendTest.Folded*:CudaBackendTest.ProgrammaticLaunch*' || exit 1
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=200 \
  probe_variants early-16 'bin=.device/dice_base;'
STORE=unfused MODELS=1.7b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=200 \
  probe_variants early-1.7b-4096 'bin=.device/dice_base;'
