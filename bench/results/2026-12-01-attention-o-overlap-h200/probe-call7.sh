#!/usr/bin/env bash
# Call 7: the committed code (e11c457: o staging 2 rounds at a time, the skinny kernel's early
# read of its old outputs) against the same plus the early read in the streaming kernel's split
# walk only (SDAR-4B's down projection; .device/dice_base here is that uncommitted build), SDAR-4B
# 1 x 1,024, three rounds; then issue 6's four SDAR-4B 1-sequence rows on the committed code with
# the PyTorch column.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call7
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=130 probe_variants \
  split-early-y ' ;bin=.device/dice_base'
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024,4096 STORE=fused,unfused BENCH_LIMIT=250 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=1 bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-1.*; do mv "$f" "$OUT/call7-${f##*/}"; done
cat "$OUT/call7-engine-bench-1.txt"
