#!/usr/bin/env bash
# Call 1: the streaming GEMM's device tests (after c4cff04's stream_ring.cuh), then
# CudaOps.PersistentStreamTimings at 1 sequence (4 rows), all four models, with the dynamic
# units (PersistentOrder::dynamic_stages, abe7898) that have not run on a device before.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 240 'CudaOps.Stream*:CudaOps.Skinny*:CudaOps.Persistent*' || exit 1
DICE_PERSISTENT_TIMINGS=1 DICE_PERSISTENT_ROWS=4 timeout 300 "$(probe_tests)" \
  --gtest_filter=CudaOps.PersistentStreamTimings 2>&1 | tee "$OUT/$PROBE-persistent.txt" |
  grep -vE "^\[ *(RUN|OK) "
