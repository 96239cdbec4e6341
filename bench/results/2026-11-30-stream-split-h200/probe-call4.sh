#!/usr/bin/env bash
# Call 4: the split walk for the down projection only (kStreamSplitMinSavingK): checks, SDAR-4B
# 1 x 1,024 split on and off, then issue 6's SDAR-4B 1-sequence rows with PyTorch beside them.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call4
probe_unpack_tests
probe_checks 150 'CudaOps.StreamGemm*:StreamGemmRule*:CudaBackendTest.StreamGemm*:CudaBackendTest.Fp32Decoding*:CudaBackendTest.SeededSampling*:CudaBackendTest.ProgrammaticLaunchChangesNoBits:CudaBackendTest.LogitsMatchTheCpuReference' || exit 1
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=120 \
  probe_variants split-4b ' ;--no-stream-gemm-split'
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024,4096 STORE=fused,unfused BENCH_LIMIT=270 \
  TORCH_TIME_LIMIT=10 BENCH_TAG=4b-1 bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-4b-1.*; do mv "$f" "$OUT/call4-${f##*/}"; done
cat "$OUT/call4-engine-bench-4b-1.txt"
