#!/usr/bin/env bash
# Call 3: issue 6's 16-sequence rows at 4,096 new tokens (SDAR-4B and SDAR-1.7B, fused and
# unfused store) on bbce066, the rows the q/k kernel's early reads (5f3f77d) touch.
set -uo pipefail
cd "$(dirname "$0")/.."
MODELS=4b,1.7b SEQUENCES=16 NEW_TOKENS=4096 STORE=fused,unfused BENCH_LIMIT=300 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=16-4096 bash bench/device_engine_bench.sh >/dev/null 2>&1
cat "$OUT/engine-bench-16-4096.txt"
