#!/usr/bin/env bash
# Call 4: as call 3, with the units' fix-up (the count at the tile and the last unit's sums) moved
# from the consumers to a warp of its own (warp 9), which the consumers hand units to and go on.
# Then the per-launch times at 4 rows of every SDAR layer shape.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call4
probe_unpack_tests
probe_checks 240 'CudaOps.StreamUnits*:CudaOps.StreamGemm*' || exit 1
DICE_SKINNY_ROWS=4 probe_timings units "4b o" "4b down" "4b gate_up" "4b qkv" "1.7b o" \
  "1.7b down" "1.7b gate_up" "1.7b qkv"
