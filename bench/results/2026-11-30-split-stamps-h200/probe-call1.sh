#!/usr/bin/env bash
# Call 1: the split walk's device tests on the stamped build, then CudaOps.StreamSplitStamps
# (experiment): SDAR-4B's o and down projections at 4 rows, split launches chained under PDL,
# per-block stamps, the head's flag wait early (the kernel's) and late (after its last stage).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 240 'CudaOps.StreamGemm*' || exit 1
DICE_SPLIT_STAMPS=2 timeout 200 "$(probe_tests)" --gtest_filter=CudaOps.StreamSplitStamps 2>&1 |
  tee "$OUT/$PROBE-stamps.txt" | grep -vE "^\[ *(RUN|OK) |  block "
