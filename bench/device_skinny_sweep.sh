#!/usr/bin/env bash
# The few-row GEMM kernels timed shape by shape on the device (issue 6: the few-row GEMMs stream
# the weights below the copy bandwidth), after bench/device_prepare.sh here (carry ".device"):
# first the skinny kernel's correctness tests (every SDAR shape against cuBLASLt, bit for bit the
# same over n-tile choices), then CudaOps.SkinnyGemmTimings (per launch us and GB/s of cuBLASLt,
# cuBLASLt after the autotune, and every skinny n-tile choice; rows: DICE_SKINNY_ROWS, default
# 4,16). Leaves $OUT/skinny-sweep.txt.
set -uo pipefail
source "$(dirname "$0")/common_device.sh"
source "$(dirname "$0")/engine_device.sh"
begin_test_report skinny-sweep.txt
tests_cmd --gtest_filter='CudaOps.SkinnyGemm*:-CudaOps.SkinnyGemmTimings' --gtest_brief=1 || echo "correctness tests: FAIL"
DICE_SKINNY_TIMINGS=1 tests_cmd --gtest_filter=CudaOps.SkinnyGemmTimings
