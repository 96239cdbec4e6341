#!/usr/bin/env bash
# Call 4: issue 6's four SDAR-1.7B 1-sequence rows (fused and unfused, 1,024 and 4,096 tokens)
# with the dynamic tail on by default for the lm_head.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call4
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024,4096 STORE=fused,unfused REPEATS=2 BENCH_LIMIT=230 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=1-1.7b bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-*; do mv "$f" "$OUT/call4-${f##*/}"; done
cat "$OUT"/call4-engine-bench-*.txt
ls "$OUT"
