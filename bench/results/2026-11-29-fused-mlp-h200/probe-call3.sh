#!/usr/bin/env bash
# Call 3: the MLP launch's barrier made sense-reversing (one atomic on the critical path, the
# generation read early): its tests, then SDAR-1.7B at 1 sequence against --no-fused-mlp.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call3
probe_unpack_tests
probe_checks 120 'CudaOps.StreamMlp*:CudaBackendTest.FusedMlp*' || exit 1
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=300 \
  probe_variants mlp-1 ' ;--no-fused-mlp'
