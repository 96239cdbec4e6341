#!/usr/bin/env bash
# Call 6: issue 6's remaining 8 rows (1 and 128 sequences at 4,096 new tokens, SDAR-4B and
# SDAR-1.7B, fused and unfused store) on 6ae2701 (bbce066's kernels), so that all 24 rows are
# measured on the q/k kernel's early reads.
set -uo pipefail
cd "$(dirname "$0")/.."
MODELS=4b,1.7b SEQUENCES=1,128 NEW_TOKENS=4096 STORE=fused,unfused BENCH_LIMIT=400 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=4096 bash bench/device_engine_bench.sh >/dev/null 2>&1
cat "$OUT/engine-bench-4096.txt"
