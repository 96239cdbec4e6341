#!/usr/bin/env bash
# Call 2: issue 6's table at 1,024 new tokens (SDAR-4B and SDAR-1.7B; 1, 16, 128 sequences; fused
# and unfused store) on bbce066 (f578a24's code: the q/k kernel's early reads of 5f3f77d), with
# the floor at the sustained GEMM rate and the clocks of each run.
set -uo pipefail
cd "$(dirname "$0")/.."
MODELS=4b,1.7b SEQUENCES=1,16,128 NEW_TOKENS=1024 STORE=fused,unfused BENCH_LIMIT=490 \
  BENCH_TAG=1024 bash bench/device_engine_bench.sh >/dev/null 2>&1
cat "$OUT/engine-bench-1024.txt"
