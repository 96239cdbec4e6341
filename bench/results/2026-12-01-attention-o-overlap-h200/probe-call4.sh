#!/usr/bin/env bash
# Call 4: kernel timelines of the kept code (o staging 2 rounds at a time) at 1 sequence, SDAR-4B
# and SDAR-1.7B, then SDAR-4B's with the staging all at once (--stage-o-batch 0), to see which
# steps moved.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call4
CONFIGS='4b:1 1.7b:1' NEW_TOKENS=256 PASSES=200 timeout 150 bash bench/device_kernel_timeline.sh \
  >/dev/null 2>&1
for f in "$OUT"/timeline*; do mv "$f" "$OUT/call4-kept-${f##*/}"; done
grep -B2 -A14 "one layer" "$OUT/call4-kept-timeline.txt"
CONFIGS='4b:1' NEW_TOKENS=256 PASSES=200 OPTIONS='--stage-o-batch 0' timeout 100 \
  bash bench/device_kernel_timeline.sh >/dev/null 2>&1
for f in "$OUT"/timeline*; do mv "$f" "$OUT/call4-batch0-${f##*/}"; done
grep -B2 -A14 "one layer" "$OUT/call4-batch0-timeline.txt"
