#!/usr/bin/env bash
# Call 1 (b7f2eeb): every GPU test of the CUDA tests binary (the PDL bit test's new
# early_residual_gemms assertions among them, written last session after its device time ran
# out), then issue 6's four SDAR-1.7B 1-sequence rows with the PyTorch column, two rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
probe_unpack_tests
PROBE=call1
probe_checks 330 '*'
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024,4096 STORE=fused,unfused REPEATS=2 BENCH_LIMIT=230 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=1-1.7b bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-1-1.7b.*; do mv "$f" "$OUT/call1-${f##*/}"; done
cat "$OUT/call1-engine-bench-1-1.7b.txt"
