#!/usr/bin/env bash
# Call 2 (b7f2eeb): issue 6's four SDAR-4B 1-sequence rows, two rounds, and SDAR-1.7B's two
# 16 x 4,096 rows, one round, each with the PyTorch column.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call2
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024,4096 STORE=fused,unfused REPEATS=2 BENCH_LIMIT=330 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=1-4b bash bench/device_engine_bench.sh >/dev/null 2>&1
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=4096 STORE=fused,unfused REPEATS=1 BENCH_LIMIT=200 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=16-4096-1.7b bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-*; do mv "$f" "$OUT/call2-${f##*/}"; done
cat "$OUT"/call2-engine-bench-*.txt
