#!/usr/bin/env bash
# Call 7 (second run; the first, call7a-persistent.txt, trapped on flagged inputs that the
# 4b-mlp chain cannot take: its down writes 2,560 of the o projection's 4,096 inputs): SDAR-4B's o,
# gate/up and down alone at 1 sequence (4 rows).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call7
probe_unpack_tests
DICE_PERSISTENT_TIMINGS=1 DICE_PERSISTENT_ROWS=4 DICE_PERSISTENT_MODELS=4b-mlp \
  timeout 300 "$(probe_tests)" --gtest_filter=CudaOps.PersistentStreamTimings 2>&1 |
  tee "$OUT/$PROBE-persistent.txt" | grep -vE "^\[ *(RUN|OK) "
