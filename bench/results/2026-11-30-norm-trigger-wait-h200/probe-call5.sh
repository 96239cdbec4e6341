#!/usr/bin/env bash
# Call 5: the kept code (d8ebccb's kernels): kernel timelines of SDAR-4B and SDAR-1.7B at 1
# sequence (the post norm now triggers gate/up right after its wait), then issue 6's eight
# 16-sequence rows (both models, 1,024 and 4,096 new tokens, fused and unfused store) with the
# PyTorch column, so that every row of the table is measured on the code of this session or on
# code whose kernels for that row have not changed since.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call5
CONFIGS='4b:1 1.7b:1' NEW_TOKENS=256 PASSES=200 timeout 150 bash bench/device_kernel_timeline.sh \
  >/dev/null 2>&1
for f in "$OUT"/timeline*; do mv "$f" "$OUT/call5-${f##*/}"; done
grep -B2 -A14 "one layer" "$OUT/call5-timeline.txt"
MODELS=4b,1.7b SEQUENCES=16 NEW_TOKENS=1024,4096 STORE=fused,unfused BENCH_LIMIT=400 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=16 bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-16.*; do mv "$f" "$OUT/call5-${f##*/}"; done
cat "$OUT/call5-engine-bench-16.txt"
