#!/usr/bin/env bash
# Call 2: the new checks (sustained GEMM rate, the sustained floor), then issue 6's table at
# 1,024 new tokens (1, 16, 128 sequences; fused and unfused store) with the floor at the
# sustained GEMM rate and the clocks of each run.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
probe_checks 90 'CudaOps.MeasuredCeilingsArePositive:CudaBackendTest.FloorsAreSummedOverPassesWithTheCeilings'
MODELS=4b,1.7b SEQUENCES=1,16,128 NEW_TOKENS=1024 STORE=fused,unfused BENCH_LIMIT=490 \
  BENCH_TAG=1024 bash bench/device_engine_bench.sh >/dev/null 2>&1
cat "$OUT/engine-bench-1024.txt"
