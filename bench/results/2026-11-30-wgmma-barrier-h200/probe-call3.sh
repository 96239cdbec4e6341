#!/usr/bin/env bash
# Call 3: issue 6's SDAR-1.7B 16 x 4,096 rows (fused and unfused store) on the relaxed last
# cluster barrier (build A3, the commit that adds this folder), with PyTorch beside them.
set -uo pipefail
cd "$(dirname "$0")/../../.."
xz -dc .device/dice.xz > .device/dice && chmod +x .device/dice
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=4096 STORE=fused,unfused BENCH_LIMIT=300 \
  TORCH_TIME_LIMIT=10 BENCH_TAG=1.7b-16-4096 bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-1.7b-16-4096.*; do mv "$f" "$OUT/call3-${f##*/}"; done
cat "$OUT/call3-engine-bench-1.7b-16-4096.txt"
