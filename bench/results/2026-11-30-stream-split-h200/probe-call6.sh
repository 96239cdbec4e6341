#!/usr/bin/env bash
# Call 6: the committed split walk (a930d3a) with the new backend test at SDAR-4B's widths, and
# the backend and ops tests around the streaming GEMM and the fused norm.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call6
probe_unpack_tests
probe_checks 300 'CudaBackendTest.StreamGemm*:CudaOps.StreamGemm*:StreamGemmRule*:CudaBackendTest.FusedNorm*:CudaBackendTest.Baseline*:CudaBackendTest.GraphsAndChunkedPrefill*:CudaBackendTest.EarlyStart*:CudaOps.SkinnyGemm*' || exit 1
