#!/usr/bin/env bash
# Call 3: issue 6's table for SDAR-4B at 4,096 new tokens (1, 16, 128 sequences; fused and
# unfused store), with the floor at the sustained GEMM rate and the clocks of each run.
set -uo pipefail
cd "$(dirname "$0")/.."
MODELS=${MODELS:-4b} SEQUENCES=1,16,128 NEW_TOKENS=4096 STORE=fused,unfused BENCH_LIMIT=${LIMIT:-520} \
  TORCH_TIME_LIMIT=6 BENCH_TAG=${TAG:-4b-4096} bash bench/device_engine_bench.sh >/dev/null 2>&1
cat "$OUT/engine-bench-${TAG:-4b-4096}.txt"
