#!/usr/bin/env bash
# Call 3: as call 2, with count-ins alone (no waits) and waits after the o and down
# projections only.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call3
probe_unpack_tests
DICE_PERSISTENT_TIMINGS=1 DICE_PERSISTENT_ROWS=4 timeout 420 "$(probe_tests)" \
  --gtest_filter=CudaOps.PersistentStreamTimings 2>&1 | tee "$OUT/$PROBE-persistent.txt" |
  grep -vE "^\[ *(RUN|OK) "
