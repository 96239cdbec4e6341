#!/usr/bin/env bash
# Call 1: the GPU tests not run since the last review's mend (the streaming op tests with y_ready,
# the PDL and staging bit tests) and the dynamic tail's op test; then tokens/s at 1 x 1,024, the
# defaults against the dynamic tail on the lm_head (shares 0.25 and 0.5) and on every launch
# whose blocks average 4 tiles (SDAR-4B's gate/up too), SDAR-4B then SDAR-1.7B.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
probe_unpack_tests
PROBE=call1
probe_checks 200 'CudaOps.Stream*:CudaOps.SkinnyGemmStaged*:CudaBackendTest.ProgrammaticLaunchChangesNoBits:CudaBackendTest.StagedOWeightsChangeNoBits:SkinnyGemmRule.*:StreamGemmRule.*' || exit 1
V=' ;--stream-dynamic-share 0.25;--stream-dynamic-share 0.5;--stream-dynamic-share 0.25 --stream-dynamic-min-tiles 4'
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=170 probe_variants 4b "$V"
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=150 probe_variants 1.7b "$V"
