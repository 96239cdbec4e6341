#!/usr/bin/env bash
# Call 1: the q/k norm + RoPE inside the attention (--qk-in-attention): its device tests (the
# attention's output and caches against the q/k kernel then the attention; the backend's bits
# with and without it), then SDAR-1.7B 16 x 1,024 (fused store: the deep kernel) tok/s against
# the base build (000c4b5) and the new build's defaults.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 200 'CudaOps.AttentionMakesQk*:CudaOps.AttentionOverThePagedCache:CudaOps.QkNorm*:CudaBackendTest.QkInAttention*' || exit 1
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=560 probe_variants qk-1.7b-16 \
  'bin=.device/dice_base; ;--qk-in-attention'
