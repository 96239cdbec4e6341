#!/usr/bin/env bash
# Call 8: issue 6's SDAR-4B 1 x 1,024 rows (fused and unfused store) on the final hand-over, with
# PyTorch beside them.
set -uo pipefail
cd "$(dirname "$0")/.."
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 STORE=fused,unfused BENCH_LIMIT=170 \
  TORCH_TIME_LIMIT=10 BENCH_TAG=4b-1-1024 bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-4b-1-1024.*; do mv "$f" "$OUT/call8-${f##*/}"; done
cat "$OUT/call8-engine-bench-4b-1-1024.txt"
