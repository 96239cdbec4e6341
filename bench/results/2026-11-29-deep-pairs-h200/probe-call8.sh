#!/usr/bin/env bash
# Call 8: issue 6's benchmark for the 16 x 4,096 rows (fused store passes) with this build's
# defaults (deep pairs from 1,536 positions), SDAR-4B and SDAR-1.7B, PyTorch beside them.
set -uo pipefail
cd "$(dirname "$0")/.."
PROBE=call8
MODELS=4b,1.7b SEQUENCES=16 NEW_TOKENS=4096 STORE=fused BENCH_LIMIT=330 bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in engine-bench.txt engine-bench.md engine-bench.tar.gz; do cp "$OUT/$f" "$OUT/$PROBE-$f" 2>/dev/null && rm -f "$OUT/$f"; done
rm -f "$OUT/engine-bench.log"
cat "$OUT/$PROBE-engine-bench.txt"
