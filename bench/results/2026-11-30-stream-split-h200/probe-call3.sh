#!/usr/bin/env bash
# Call 3: the split walk with the head's tail sums read before its last stage and one fence on
# the tail's side: checks, per launch at 4 rows, SDAR-4B 1 x 1,024 split on, off, and only where
# in >= 8,192 (the down projection; experiment switch DICE_EXP_SPLIT_MIN_IN in the working tree).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call3
probe_unpack_tests
probe_checks 120 'CudaOps.StreamGemm*:StreamGemmRule*:CudaBackendTest.StreamGemm*:CudaBackendTest.ProgrammaticLaunchChangesNoBits' || exit 1
DICE_SKINNY_ROWS=4 probe_timings split '4b o' '4b down' | grep -E "split|skinny n2|stream pdl"
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=200 \
  probe_variants split-4b ' ;--no-stream-gemm-split;bin=.device/dice_down'
