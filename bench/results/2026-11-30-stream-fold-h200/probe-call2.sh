#!/usr/bin/env bash
# Call 2: the streaming GEMM's folded RMSNorm (fold_stream_norms): checks, then 1 x 1,024 with and
# without it.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
probe_checks 300 'CudaOps.StreamGemm*:CudaBackendTest.FoldedStreamNorms*:CudaBackendTest.LogitsMatchTheCpuReference:CudaBackendTest.StreamGemmSplit*:CudaBackendTest.FusedNorm*' || exit 1
MODELS=1.7b,4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=360 probe_variants fold-1 ' ;--fold-stream-norms'
