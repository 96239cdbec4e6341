#!/usr/bin/env bash
# Call 2 (the option, on by default): the streaming and skinny GEMM op tests (y_ready's bits), the
# backend's CPU-reference and PDL bit tests, then tokens/s, the defaults against
# --no-early-residual-reads, at SDAR-1.7B 1 x 1,024 and 1 x 4,096 and SDAR-4B 1 x 4,096.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
probe_unpack_tests
PROBE=call2
probe_checks 120 'CudaOps.Stream*:CudaOps.Skinny*:CudaBackendTest.ProgrammaticLaunchChangesNoBits:CudaBackendTest.LogitsMatchTheCpuReference:CudaBackendTest.StreamGemmLogitsMatchTheCpuReference:CudaBackendTest.FusedNormAndSwigluChangeNoBits' || exit 1
V=' ;--no-early-residual-reads'
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024,4096 REPEATS=2 VARIANTS_LIMIT=170 probe_variants 1.7b "$V"
MODELS=4b SEQUENCES=1 NEW_TOKENS=4096 REPEATS=2 VARIANTS_LIMIT=150 probe_variants 4b-4096 "$V"
