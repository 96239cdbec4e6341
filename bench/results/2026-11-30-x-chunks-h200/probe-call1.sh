#!/usr/bin/env bash
# Call 1: the streaming GEMM's x-chunk loads in one helper (stream_ring.cuh's load_x_chunks,
# shared by the split walk, the whole-tile loop and the persistent probe): the whole-tile
# kernels' SASS is unchanged, the split walk's is 8-40 instructions shorter. Its device tests,
# the probe's SDAR-4B o model, then SDAR-4B 1 x 1,024 (the down projection on the split walk)
# tok/s against the base build (000c4b5), three rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 200 'CudaOps.StreamGemm*:CudaBackendTest.StreamGemm*' || exit 1
DICE_PERSISTENT_TIMINGS=1 DICE_PERSISTENT_ROWS=4 DICE_PERSISTENT_MODELS=4b-o \
  timeout 150 "$(probe_tests)" --gtest_filter=CudaOps.PersistentStreamTimings 2>&1 |
  tee "$OUT/$PROBE-persistent.txt" | grep -E "PASSED|FAILED|Failure|2 x 2048, a launch"
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=330 probe_variants x-chunks-4b \
  'bin=.device/dice_base; '
