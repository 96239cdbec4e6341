#!/usr/bin/env bash
# Call 1: the deep attention applies the q/k norm + RoPE itself (--attention-qk-norm-rope, the
# new default): its tests and those it touches, then tokens/s against
# --no-attention-qk-norm-rope at 16 sequences (SDAR-1.7B fused and unfused store, SDAR-4B).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 240 'CudaOps.DeepAttentionAppliesTheQkNormRopeItself:CudaOps.QkNormRope*:CudaOps.AttentionAtMany*:CudaBackendTest.QkNormRopeInside*:CudaBackendTest.ProgrammaticLaunch*:CudaBackendTest.DeepAndPaired*:CudaBackendTest.FoldedNorms*:CudaBackendTest.LogitsMatch*' || exit 1
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=150 \
  probe_variants qk-16 ' ;--no-attention-qk-norm-rope'
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=100 \
  probe_variants qk-4b-16 ' ;--no-attention-qk-norm-rope'
STORE=unfused MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=80 \
  probe_variants qk-16-unfused ' ;--no-attention-qk-norm-rope'
