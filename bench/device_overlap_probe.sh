#!/usr/bin/env bash
# Whether the layer GEMMs and the attention could run side by side at 128 sequences (issue 6: at
# 128 x 1,024 the forward runs compute-bound GEMMs and memory-bound attention one after the
# other), after bench/device_prepare.sh here (carry ".device"): CudaOps.GemmWithAnSmCountTarget
# (cuBLASLt planned for fewer SMs still computes x w^T), then CudaOps.OverlapTimings (SDAR-4B
# GEMMs at 512 rows and a 128-sequence attention pass, us per layer: each alone, one after the
# other, and at once on two streams with the SMs shared out, then on two green contexts; its
# comment in engine/cuda/tests/cuda_ops_test.cpp says how). On an H100 neither overlap gains
# more than 2-4% (bench/results/2026-11-24-overlap-masked-h100). Knobs: DICE_OVERLAP_CONTEXTS,
# DICE_OVERLAP_GEMM_SMS (comma lists). Leaves $OUT/overlap-probe.txt.
set -uo pipefail
source "$(dirname "$0")/common_device.sh"
source "$(dirname "$0")/engine_device.sh"
begin_test_report overlap-probe.txt
tests_cmd --gtest_filter='CudaOps.GemmWithAnSmCountTarget' --gtest_brief=1 || echo "correctness test: FAIL"
DICE_OVERLAP_TIMINGS=1 timeout 300 "$TESTS" --gtest_filter=CudaOps.OverlapTimings
