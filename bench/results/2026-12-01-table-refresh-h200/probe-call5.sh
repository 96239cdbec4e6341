#!/usr/bin/env bash
# Call 5 (b7f2eeb): issue 6's four 128 x 4,096 rows, one round, with the PyTorch column.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call5
MODELS=1.7b,4b SEQUENCES=128 NEW_TOKENS=4096 STORE=fused,unfused BENCH_LIMIT=470 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=128-4096 bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-*; do mv "$f" "$OUT/call5-${f##*/}"; done
cat "$OUT"/call5-engine-bench-*.txt
