#!/usr/bin/env bash
# Call 5: the accumulating GEMM epilogues (the skinny and the streaming kernel: the o and down
# projections at 1-16 rows) read their outputs' old values right after the wait (the streaming
# kernel: at the tile's first stage), not after the k loop: one global round trip fewer at the
# end of each launch, the same bits. Uncommitted build (.device/dice) against a3d5232
# (.device/dice_base). The GEMM tests first.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call5
probe_unpack_tests
probe_checks 150 'CudaOps.*Gemm*:CudaBackendTest.FusedNormAndSwigluChangeNoBits' || exit 1
MODELS=4b,1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=200 probe_variants \
  early-y 'bin=.device/dice_base; '
