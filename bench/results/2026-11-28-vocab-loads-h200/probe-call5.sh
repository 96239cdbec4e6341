#!/usr/bin/env bash
set -uo pipefail
cd "$(dirname "$0")/.."
for b in dice_vocab dice_engine_cuda_tests; do xz -dc .device/$b.xz > .device/$b && chmod +x .device/$b; done
source bench/common_device.sh
source bench/engine_device.sh
{ machine_header; timeout 120 "$TESTS" --gtest_filter='CudaOps.VocabPass*:CudaBackendTest.SeededSampling*:CudaBackendTest.LogitsMatch*:CudaBackendTest.Fp32Decoding*:CudaBackendTest.ProgrammaticLaunch*' --gtest_brief=1 2>&1 | tail -8; } > "$OUT/tests.txt" 2>&1
cat "$OUT/tests.txt"
MODELS=1.7b SEQUENCES=128 NEW_TOKENS=1024 REPEATS=1 VARIANTS='bin=.device/dice_vocab;' VARIANTS_LIMIT=90 bash bench/device_engine_variants.sh | tail -3
