#!/usr/bin/env bash
# Call 4 (second run; the first, call4a-mlp-timings.txt, hung in a variant without the grid
# barriers, where two GEMMs' hand-over flags can meet, and was killed at 200 s): the experiment's CudaOps.StreamMlpTimings: the persistent MLP launch against the four
# launches at SDAR-4B, 4 rows, 36 layers from HBM, and its per-block stamps.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call4
probe_unpack_tests
DICE_STREAM_MLP_TIMINGS=1 timeout 120 "$(probe_tests)" --gtest_filter=CudaOps.StreamMlpTimings 2>&1 |
  tee "$OUT/$PROBE-mlp-timings.txt" | grep -vE "^\[ *(RUN|OK) "
