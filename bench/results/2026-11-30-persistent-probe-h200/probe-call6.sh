#!/usr/bin/env bash
# Call 6: as call 5, the flagged inputs issued together and checked after (one round trip a
# stage), read through L1 once seen.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call6
probe_unpack_tests
DICE_PERSISTENT_TIMINGS=1 DICE_PERSISTENT_ROWS=4 timeout 420 "$(probe_tests)" \
  --gtest_filter=CudaOps.PersistentStreamTimings 2>&1 | tee "$OUT/$PROBE-persistent.txt" |
  grep -vE "^\[ *(RUN|OK) "
