#!/usr/bin/env bash
# Call 1: the few-row GEMMs (skinny and streaming kernels) ask for their next weights in L2
# before their programmatic wait (--gemm-l2-prefetch-mib): the tests that compare bits, then
# tokens/s at SDAR-1.7B and SDAR-4B 1 x 1,024 with 0 (off), 16, 48 and 4,096 MiB (all).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 150 'CudaOps.StreamGemm*:CudaOps.SkinnyGemm*:CudaBackendTest.ProgrammaticLaunch*' || exit 1
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=170 \
  probe_variants prefetch-1.7b ' ;--gemm-l2-prefetch-mib 16;--gemm-l2-prefetch-mib 48;--gemm-l2-prefetch-mib 4096'
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=200 \
  probe_variants prefetch-4b ' ;--gemm-l2-prefetch-mib 16;--gemm-l2-prefetch-mib 48;--gemm-l2-prefetch-mib 4096'
