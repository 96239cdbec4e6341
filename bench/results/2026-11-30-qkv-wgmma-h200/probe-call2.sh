#!/usr/bin/env bash
# Call 2 (run twice: the first stopped on two test mistakes, fixed before the second): the q/k norm + RoPE in the qkv projection's wgmma epilogue (WgmmaQkRope, tile_n 128):
# checks, then 16 x 1,024 tokens/s side by side: base (3c9c511), this build (on by default), this
# build with --no-fused-qk-norm-rope.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
probe_checks 200 'CudaOps.WgmmaQkRope*:CudaOps.QkNormRope*:CudaOps.WgmmaGemm*:CudaBackendTest.QkRope*:CudaBackendTest.FoldedNorms*:CudaBackendTest.WgmmaGemm*' || exit 1
MODELS=1.7b,4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=330 \
  probe_variants qk-16 'bin=.device/dice_base;;--no-fused-qk-norm-rope'
