#!/usr/bin/env bash
# Call 7: the hand-over with one acquire (thread 0, before the barrier that ends the segment
# before the head) and no fence before the tail's release, against .device/dice_base.xz (the
# build of 57e5f72): checks, per launch at 4 rows, SDAR-4B 1 x 1,024 side by side.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call7
probe_unpack_tests
probe_checks 120 'CudaOps.StreamGemm*:StreamGemmRule*:CudaBackendTest.StreamGemmSplit*' || exit 1
DICE_SKINNY_ROWS=4 probe_timings split '4b o' '4b down' | grep -E "split|skinny n2|stream pdl"
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=150 \
  probe_variants handover-4b ' ;bin=.device/dice_base.xz'
