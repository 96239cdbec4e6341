#!/usr/bin/env bash
# Call 3: call 2's n8 runs with the 8-column tile on a path of its own (a whole tile's chunk loop
# as in the base): the streaming GEMM's checks, per-launch times at 4 rows, tokens/s at 1 x 1,024
# against the build before (dice_base) on both models.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call3
probe_unpack_tests
probe_checks 100 'CudaOps.StreamGemm*:StreamGemmRule*:CudaBackendTest.StreamGemm*' || exit 1
DICE_SKINNY_ROWS=4 probe_timings n8-path '4b gate_up' '1.7b gate_up' '1.7b o'
MODELS=4b,1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=300 \
  probe_variants n8-path 'bin=.device/dice_base.xz; '
