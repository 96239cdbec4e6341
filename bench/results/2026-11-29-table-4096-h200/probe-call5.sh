#!/usr/bin/env bash
# Call 5: every GPU test on the session's last code (the deep pairs off without paired tiles, the
# 4,204-position attention case), then issue 6's benchmark rows at 4,096 new tokens not measured
# on the H200 since the 8-warp deep pairs: 1 and 128 sequences, fused store.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call5
probe_unpack_tests
start=$SECONDS
probe_checks 260 '*'
echo "checks took $((SECONDS - start)) s"
start=$SECONDS
MODELS=4b,1.7b SEQUENCES=1,128 NEW_TOKENS=4096 STORE=fused BENCH_LIMIT=290 bash bench/device_engine_bench.sh > /dev/null 2>&1
cp "$OUT/engine-bench.txt" "$OUT/$PROBE-engine-bench.txt"; cp "$OUT/engine-bench.md" "$OUT/$PROBE-engine-bench.md"
cat "$OUT/$PROBE-engine-bench.txt" | tail -25
echo "bench took $((SECONDS - start)) s"
