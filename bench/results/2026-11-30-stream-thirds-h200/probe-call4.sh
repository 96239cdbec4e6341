#!/usr/bin/env bash
# Call 4: the streaming GEMM on three stages of 1,280 k where in = 2,560 (SDAR-4B's qkv, gate/up
# and lm_head): the checks (the same bits as the default ring), per-launch times at 4 rows with
# both rings, tokens/s at SDAR-4B 1 x 1,024 against the build before (dice_base).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call4
probe_unpack_tests
probe_checks 100 'CudaOps.StreamGemm*:StreamGemmRule*:CudaBackendTest.StreamGemm*' || exit 1
DICE_SKINNY_ROWS=4 probe_timings thirds '4b gate_up' '4b qkv'
DICE_STREAM_NO_THIRDS=1 DICE_SKINNY_ROWS=4 probe_timings default-ring '4b gate_up' '4b qkv'
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=200 \
  probe_variants thirds 'bin=.device/dice_base.xz; '
