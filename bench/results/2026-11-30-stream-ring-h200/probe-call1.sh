#!/usr/bin/env bash
# Call 1: the streaming GEMM on a ring of two 1,024-k stages (two blocks a SM, so the next
# GEMM's blocks are resident and fill their ring while this one runs) against 2,048-k stages:
# the bit-equality test, per-launch times alone and chained under PDL (4 rows), then tokens/s at
# 1 x 1,024 (both models, three alternating rounds).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call1
probe_unpack_tests
probe_checks 120 'CudaOps.StreamGemm*' || exit 1
DICE_SKINNY_ROWS=4 probe_timings ring2048 '1.7b qkv' '1.7b o' '1.7b gate_up' '1.7b down' '4b qkv' '4b gate_up'
DICE_STREAM_STAGE_K=1024 DICE_SKINNY_ROWS=4 probe_timings ring1024 '1.7b qkv' '1.7b o' '1.7b gate_up' '1.7b down' '4b qkv' '4b gate_up'
MODELS=1.7b,4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=300 \
  probe_variants ring-1x1024 ' ;bin=.device/dice_small'
