#!/usr/bin/env bash
# Call 1: the split walk for SDAR-4B's o and down projections (stream_gemm_split): checks (and the
# last session's untested mends), per launch at 4 rows, SDAR-4B 1 x 1,024 split on and off.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 240 'CudaOps.StreamGemm*:StreamGemmRule*:WgmmaGemmRule*:CudaOps.Wgmma*:CudaBackendTest.StreamGemm*:CudaBackendTest.Fp32Decoding*:CudaBackendTest.SeededSampling*:CudaBackendTest.ProgrammaticLaunchChangesNoBits:CudaBackendTest.LogitsMatchTheCpuReference' || exit 1
DICE_SKINNY_ROWS=4 probe_timings split '4b o' '4b down'
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=200 \
  probe_variants split-4b ' ;--no-stream-gemm-split'
