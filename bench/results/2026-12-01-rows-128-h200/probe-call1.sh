#!/usr/bin/env bash
# Call 1: kernel timelines at 128 sequences, 1,024 new tokens (issue 6's 128 x 1,024 rows and
# the JetEngine comparison), SDAR-4B and SDAR-1.7B, fused store, as HEAD af7d2d4 runs them.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call1
nvidia-smi --query-gpu=power.limit,clocks.max.sm,clocks.max.mem --format=csv
CONFIGS='4b:128 1.7b:128' NEW_TOKENS=1024 PASSES=100 timeout 420 bash bench/device_kernel_timeline.sh \
  >/dev/null 2>&1
for f in "$OUT"/timeline*; do mv "$f" "$OUT/call1-${f##*/}"; done
grep -B2 -A24 "one layer" "$OUT/call1-timeline.txt"
