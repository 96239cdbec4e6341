#!/usr/bin/env bash
# Call 3: the units form of the streaming GEMM (StreamUnits: (tile, k stage) units dealt or
# taken from a counter, the last unit at a tile adding its units' sums): its device test, then
# per-launch times at 4 rows of every SDAR layer shape against the whole-tile and split launches.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call3
probe_unpack_tests
probe_checks 240 'CudaOps.StreamUnits*:CudaOps.StreamGemm*' || exit 1
DICE_SKINNY_ROWS=4 probe_timings units "4b o" "4b down" "4b gate_up" "4b qkv" "1.7b o" \
  "1.7b down" "1.7b gate_up" "1.7b qkv"
