#!/usr/bin/env bash
# Call 4: the one-wave split rule (--wgmma-wave-splits): its tests, then tokens/s at 16 x 1,024
# (both models) and SDAR-1.7B 16 x 4,096 (unfused and fused store), two alternating rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call4
probe_unpack_tests
probe_checks 120 'WgmmaGemmRule.*:CudaBackendTest.WgmmaWaveSplits*:CudaBackendTest.FoldedNorms*:CudaBackendTest.ProgrammaticLaunchChangesNoBits' || exit 1
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=200 \
  probe_variants wave-16 ' ;--wgmma-wave-splits'
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=4096 STORE=unfused REPEATS=2 VARIANTS_LIMIT=150 \
  probe_variants wave-16x4096-unfused ' ;--wgmma-wave-splits'
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=4096 STORE=fused REPEATS=2 VARIANTS_LIMIT=150 \
  probe_variants wave-16x4096-fused ' ;--wgmma-wave-splits'
