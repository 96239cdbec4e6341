#!/usr/bin/env bash
# Call 5: as call 4 with the flagged inputs (PersistentOrder::flagged: NCCL LL-style words of
# value and epoch instead of counters).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call5
probe_unpack_tests
DICE_PERSISTENT_TIMINGS=1 DICE_PERSISTENT_ROWS=4 timeout 420 "$(probe_tests)" \
  --gtest_filter=CudaOps.PersistentStreamTimings 2>&1 | tee "$OUT/$PROBE-persistent.txt" |
  grep -vE "^\[ *(RUN|OK) "
