#!/usr/bin/env bash
# Call 5 (the review mend): CudaOps.PersistentStreamTimings with its models derived from the two
# full models and its rings through one mapping (with_ring), on 4b-mlp and 4b-o at 1 sequence:
# the same variants and checks as calls 1-2 (4b-o without its meaningless "waits after o, down").
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call5
probe_unpack_tests
DICE_PERSISTENT_TIMINGS=1 DICE_PERSISTENT_ROWS=4 DICE_PERSISTENT_MODELS=4b-mlp,4b-o \
  timeout 300 "$(probe_tests)" --gtest_filter=CudaOps.PersistentStreamTimings 2>&1 |
  tee "$OUT/$PROBE-persistent.txt" | grep -E "PASSED|FAILED|Failure|launches, pdl|2 x 2048, a launch"
