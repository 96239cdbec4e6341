#!/usr/bin/env bash
# Call 3 (the dynamic tail on by default for the lm_head: share 0.5, blocks averaging 32 tiles):
# the backend's bit tests with it (DynamicTailChangesNoBits among them) and the op test, then
# issue 6's four SDAR-4B 1-sequence rows (fused and unfused, 1,024 and 4,096 tokens) on it.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
probe_unpack_tests
PROBE=call3
probe_checks 120 'CudaBackendTest.DynamicTailChangesNoBits:CudaBackendTest.LogitsMatchTheCpuReference:CudaBackendTest.StreamGemm*:CudaBackendTest.ProgrammaticLaunchChangesNoBits:CudaBackendTest.StagedOWeightsChangeNoBits:CudaOps.StreamGemmDynamic*:StreamGemmRule.*' || exit 1
rm -f "$OUT"/engine-check.*
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024,4096 STORE=fused,unfused REPEATS=2 BENCH_LIMIT=330 \
  TORCH_TIME_LIMIT=6 BENCH_TAG=1-4b bash bench/device_engine_bench.sh >/dev/null 2>&1
for f in "$OUT"/engine-bench-*; do mv "$f" "$OUT/call3-${f##*/}"; done
cat "$OUT"/call3-engine-bench-*.txt
ls "$OUT"
