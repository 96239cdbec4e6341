#!/usr/bin/env bash
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice_base.xz > .device/dice_base && chmod +x .device/dice_base
xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests
source bench/common_device.sh
source bench/engine_device.sh
{ machine_header; tests_cmd --gtest_filter='CudaOps.VocabPass*:CudaBackendTest.*Sampl*:CudaBackendTest.*Greedy*' --gtest_brief=1 2>&1 | tail -15; } > "$OUT/tests.txt" 2>&1
cat "$OUT/tests.txt"
MODELS=${M:-1.7b,4b} SEQUENCES=${S:-128} NEW_TOKENS=1024 REPEATS=${R:-2} VARIANTS='bin=.device/dice_base;' VARIANTS_LIMIT=${L:-420} bash bench/device_engine_variants.sh | tail -8
