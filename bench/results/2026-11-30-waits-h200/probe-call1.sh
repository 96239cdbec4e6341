#!/usr/bin/env bash
# Call 1: the q/k and attention kernels wait for the grid before them once (a second
# griddepcontrol.wait only with early reads): the tests that compare bits with and without PDL
# and early reads, then issue 6's SDAR-1.7B 128 x 4,096 unfused row on this code.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 200 'CudaBackendTest.ProgrammaticLaunch*:CudaBackendTest.EarlyStart*:CudaOps.QkNormRope*:CudaOps.Attention*:CudaBackendTest.Deep*:CudaBackendTest.LogitsMatchTheCpuReference:CudaBackendTest.SeededSampling*' || exit 1
MODELS=1.7b SEQUENCES=128 NEW_TOKENS=4096 STORE=unfused BENCH_LIMIT=300 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=128-4096-unfused bash bench/device_engine_bench.sh >/dev/null 2>&1
cat "$OUT/engine-bench-128-4096-unfused.txt"
