#!/usr/bin/env bash
# Call 6: the streaming GEMM's stages a tile's whole k where 2,560 divides it (SDAR-4B's qkv and
# gate/up: one stage of 5 KiB copies instead of 2,048 + 512; --stream-long-stages): its tests,
# then SDAR-4B at 1 sequence against --no-stream-long-stages.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call6
probe_unpack_tests
probe_checks 120 'CudaOps.StreamGemm*:StreamGemmRule*:CudaBackendTest.StreamGemm*' || exit 1
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=220 \
  probe_variants long-1 ' ;--no-stream-long-stages'
