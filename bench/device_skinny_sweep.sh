#!/usr/bin/env bash
# The skinny GEMM's n-tile and k-split choices timed shape by shape on the device (issue 6: the
# few-row GEMMs stream the weights below the copy bandwidth), after bench/device_prepare.sh here
# (carry ".device"): first the kernel's correctness tests (every SDAR shape against cuBLASLt, each
# split count bit for bit the same over n-tile choices), then CudaOps.SkinnyGemmTimings (per
# launch us and GB/s for every n-tile x k-split choice and cuBLASLt, at 4 and 16 rows; '*' marks
# the split count skinny_k_splits picks). Leaves $OUT/skinny-sweep.txt.
set -uo pipefail
source "$(dirname "$0")/common_device.sh"
tests="$root/.device/dice_engine_cuda_tests"
exec > >(tee "$OUT/skinny-sweep.txt") 2>&1
machine_header
[ -x "$tests" ] || { echo "no $tests: run bench/device_prepare.sh after a CUDA build"; exit 1; }
"$tests" --gtest_filter='CudaOps.SkinnyGemm*:-CudaOps.SkinnyGemmTimings' --gtest_brief=1 || echo "correctness tests: FAIL"
DICE_SKINNY_TIMINGS=1 "$tests" --gtest_filter=CudaOps.SkinnyGemmTimings
