#!/usr/bin/env bash
# Call 1: the split walk over whole 2,048-k stages with the hand-over's wait after the head
# (experiment, --stream-split-stage-rounds: SDAR-4B's o projection): its device tests, its
# per-launch time at 4 rows, then SDAR-4B 1 x 1,024 tok/s against the base build (299ba48), the
# new build's defaults and o on whole streaming tiles (--stream-gemm-min-fill 0.6).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 240 'CudaOps.StreamGemm*:CudaBackendTest.StreamGemm*' || exit 1
DICE_SKINNY_ROWS=4 probe_timings stages "4b o"
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=330 probe_variants stages-4b \
  'bin=.device/dice_base; ;--stream-split-stage-rounds;--stream-gemm-min-fill 0.6'
