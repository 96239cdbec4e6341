#!/usr/bin/env bash
# Call 5: the attention asks L2 for its first work item's K/V pages before its programmatic
# wait (--attention-prefetch): the tests it touches, then tokens/s against --no-attention-prefetch
# at 1 sequence (SDAR-1.7B, -4B) and 16 and 128 sequences (SDAR-1.7B).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call5
probe_unpack_tests
probe_checks 200 'CudaBackendTest.AttentionPrefetch*:CudaBackendTest.ProgrammaticLaunch*:CudaBackendTest.DeepAndPaired*:CudaBackendTest.CudaCoreAndTensorCore*' || exit 1
MODELS=1.7b,4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=200 \
  probe_variants prefetch-1 ' ;--no-attention-prefetch'
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=90 \
  probe_variants prefetch-16 ' ;--no-attention-prefetch'
