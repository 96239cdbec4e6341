#!/usr/bin/env bash
# Call 4: as call 3 with three more rings (5 x 1280, 4 and 6 x 1024) and one extra barrier
# at most.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call4
probe_unpack_tests
DICE_PERSISTENT_TIMINGS=1 DICE_PERSISTENT_ROWS=4 timeout 420 "$(probe_tests)" \
  --gtest_filter=CudaOps.PersistentStreamTimings 2>&1 | tee "$OUT/$PROBE-persistent.txt" |
  grep -vE "^\[ *(RUN|OK) "
