#!/usr/bin/env bash
# Call 6: at 128 sequences the card runs power-capped, while the GEMM autotune times cuBLASLt's
# candidates in short bursts at full clock. Does the heuristic's first choice do better than the
# tuned one under the cap? SDAR-4B 128 x 1,024, two ABAB rounds, clocks sampled.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call6
TZ=UTC nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active \
  --format=csv -lms 200 >"$OUT/$PROBE-clocks.csv" 2>&1 &
smi=$!
MODELS=4b SEQUENCES=128 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=230 \
  probe_variants autotune "--sustained-gemm-seconds 0;--sustained-gemm-seconds 0 --no-gemm-autotune"
kill "$smi"
