#!/usr/bin/env bash
# Call 1: the q/k norm + RoPE kernel reads its row's metadata, RoPE pairs and norm weight before
# its programmatic wait (with --pdl-early-reads, the default): the tests that compare bits under
# PDL with and without early reads, then tokens/s against the build before it (d4a835a,
# .device/dice_base.xz) at SDAR-1.7B 16 x 1,024 and 1 x 1,024 and SDAR-4B 16 x 1,024.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 200 'CudaBackendTest.ProgrammaticLaunch*:CudaOps.QkNormRope*:CudaBackendTest.FoldedNorms*:CudaBackendTest.EarlyStart*' || exit 1
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=120 \
  probe_variants early-16 'bin=.device/dice_base.xz; '
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=90 \
  probe_variants early-4b-16 'bin=.device/dice_base.xz; '
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=60 \
  probe_variants early-1 'bin=.device/dice_base.xz; '
