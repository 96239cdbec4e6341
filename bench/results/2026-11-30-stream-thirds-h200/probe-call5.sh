#!/usr/bin/env bash
# Call 5: the committed three-stage ring for in = 2,560 (060c69d): its checks and the backend's;
# SDAR-1.7B 1 x 1,024 against an experiment build (dice_exp: three 2,048-k stages where 2,048
# divides in); then issue 6's SDAR-4B 1-sequence rows (1,024 and 4,096 tokens, fused and unfused
# store) on 060c69d with PyTorch beside them.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call5
probe_unpack_tests
probe_checks 150 'CudaOps.StreamGemm*:StreamGemmRule*:CudaBackendTest.StreamGemm*:CudaBackendTest.Fp32Decoding*:CudaBackendTest.SeededSampling*:CudaBackendTest.ProgrammaticLaunchChangesNoBits:CudaBackendTest.BaselineAndDefaultKernelsGiveTheSameBf16Logits:CudaBackendTest.LogitsMatchTheCpuReference' || exit 1
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=110 \
  probe_variants deep-ring-1.7b ' ;bin=.device/dice_exp.xz'
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024,4096 STORE=fused,unfused BENCH_LIMIT=270 \
  TORCH_TIME_LIMIT=10 BENCH_TAG=4b-1 bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-4b-1.*; do mv "$f" "$OUT/call5-${f##*/}"; done
cat "$OUT/call5-engine-bench-4b-1.txt"
