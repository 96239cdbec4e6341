#!/usr/bin/env bash
# Call 1 (2026-11-29, twentieth session): every GPU test on HEAD, then SM clocks and power while
# SDAR-4B and -1.7B decode 128 x 1,024 and 1 x 1,024 (nvidia-smi every 100 ms).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 260 '*'
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active \
  --format=csv -lms 100 >"$OUT/$PROBE-clocks.csv" 2>&1 &
smi=$!
marks="$OUT/$PROBE-marks.txt"
mark() { echo "$(date -u +%Y/%m/%d\ %H:%M:%S.%3N) $*" >>"$marks"; }
mark start
for s in 128 1; do
  mark "begin sequences $s"
  MODELS=4b,1.7b SEQUENCES=$s NEW_TOKENS=1024 REPEATS=1 probe_variants "clocks-$s" " "
  mark "end sequences $s"
done
kill "$smi"
