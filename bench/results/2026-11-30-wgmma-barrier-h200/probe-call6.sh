#!/usr/bin/env bash
# Call 6: issue 6's SDAR-1.7B 16 x 4,096 rows again on A3 (a second sample), then the streaming
# GEMM's producer loops as one generic loop (build B, on A3; whole-tile kernels 8-56 SASS
# instructions fewer, split kernels unchanged): checks, then 1 x 1,024 against A3.
set -uo pipefail
cd "$(dirname "$0")/../../.."
xz -dc .device/dice_A3.xz > .device/dice && chmod +x .device/dice
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=4096 STORE=fused,unfused BENCH_LIMIT=120 \
  TORCH_TIME_LIMIT=10 BENCH_TAG=1.7b-16-4096 bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-1.7b-16-4096.*; do mv "$f" "$OUT/call6-${f##*/}"; done
grep -E "^ *1.7b|within" "$OUT/call6-engine-bench-1.7b-16-4096.txt"
xz -dc .device/dice.xz > .device/dice && chmod +x .device/dice
source bench/device_probe_lib.sh
PROBE=call6
probe_unpack_tests
probe_checks 90 'CudaOps.StreamGemm*:CudaBackendTest.StreamGemm*' || exit 1
MODELS=1.7b,4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=130 probe_variants produce-1 'bin=.device/dice_A3.xz;'
