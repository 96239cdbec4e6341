#!/usr/bin/env bash
# Call 2: the same at 1 sequence (4 rows), with four rings and the probe kernel launched once
# a GEMM under PDL (the even split without persistence).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
DICE_PERSISTENT_TIMINGS=1 DICE_PERSISTENT_ROWS=4 timeout 420 "$(probe_tests)" \
  --gtest_filter=CudaOps.PersistentStreamTimings 2>&1 | tee "$OUT/$PROBE-persistent.txt" |
  grep -vE "^\[ *(RUN|OK) "
