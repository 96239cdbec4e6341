#!/usr/bin/env bash
# Call 4 (b7f2eeb): issue 6's eight 16- and 128-sequence rows at 1,024 new tokens, then SDAR-4B's
# two 16 x 4,096 rows, one round each, with the PyTorch column.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call4
MODELS=4b,1.7b SEQUENCES=16,128 NEW_TOKENS=1024 STORE=fused,unfused BENCH_LIMIT=380 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=16-128-1024 bash bench/device_engine_bench.sh >/dev/null 2>&1
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 STORE=fused,unfused BENCH_LIMIT=150 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=16-4096-4b bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-*; do mv "$f" "$OUT/call4-${f##*/}"; done
cat "$OUT"/call4-engine-bench-*.txt
