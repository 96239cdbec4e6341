#!/usr/bin/env bash
# Call 2: early pages with Q loaded into shared memory by plain loads (not register fragments):
# the attention op tests and the backend's PDL bit test, then tokens/s, defaults against early
# pages, at 1 x 1,024 and 16 x 1,024 on SDAR-4B and SDAR-1.7B.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
probe_unpack_tests
PROBE=call2
probe_checks 100 'CudaOps.Attention*:CudaOps.DeepPaired*:CudaBackendTest.ProgrammaticLaunchChangesNoBits' || exit 1
V=' ;--attention-early-pages'
MODELS=4b,1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=200 probe_variants early-1 "$V"
MODELS=4b,1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=200 probe_variants early-16 "$V"
