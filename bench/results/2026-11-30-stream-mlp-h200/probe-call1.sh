#!/usr/bin/env bash
# Call 1: the persistent MLP launch (--stream-mlp) and the split walk's refactor: their GPU
# tests, then SDAR-4B tokens/s at 1 x 1,024 against the base build (00b4625's engine).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 300 'CudaOps.StreamMlp*:CudaOps.StreamGemm*:CudaBackendTest.StreamMlp*:CudaBackendTest.StreamGemm*:CudaBackendTest.ProgrammaticLaunch*' || exit 1
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=300 \
  probe_variants mlp-4b 'bin=.device/dice_base; ;--stream-mlp'
