#!/usr/bin/env bash
# Call 2: the MLP in one streaming launch (fused_mlp): its tests and the tests it touches, then
# tokens/s at 1 sequence against --no-fused-mlp and against the build before the change.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
probe_checks 200 'CudaOps.StreamMlp*:CudaOps.StreamGemm*:CudaBackendTest.FusedMlp*:CudaBackendTest.FusedNormAndSwiglu*:CudaBackendTest.StreamGemm*:CudaBackendTest.ProgrammaticLaunch*' || exit 1
MODELS=1.7b,4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=330 \
  probe_variants mlp-1 ' ;--no-fused-mlp;bin=.device/dice_base.xz'
