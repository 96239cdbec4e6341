#!/usr/bin/env bash
# Call 2: the one-warp attention kernel (experiment commit, DICE_EXP_WARP_ITEMS=1): its op test at
# every head_dim, the backend's CPU-reference tests with every default-route pass on it
# (DICE_EXP_WARP_ITEMS_MIN=1), tokens/s at 128 x 1,024 against the default, and its timeline.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
probe_unpack_tests
PROBE=call2
probe_checks 120 'CudaOps.AttentionOverThePagedCache' || exit 1
PROBE=call2-backend
DICE_EXP_WARP_ITEMS=1 DICE_EXP_WARP_ITEMS_MIN=1 probe_checks 150 \
  'CudaBackendTest.LogitsMatchTheCpuReference:CudaBackendTest.SeededSamplingReproducesRunToRun:CudaBackendTest.GraphsAndChunkedPrefillDoNotChangeLogits:CudaBackendTest.CudaCoreAndTensorCoreAttentionAgree:CudaBackendTest.FullCacheIsMadeRoomForByPreemptionWithTheCpuTokens' || exit 1
PROBE=call2
probe_env_wrapper dice_warp 'DICE_EXP_WARP_ITEMS=1'
MODELS=4b,1.7b SEQUENCES=128 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=300 probe_variants warp-128 \
  ' ;bin=.device/dice_warp'
DICE_EXP_WARP_ITEMS=1 CONFIGS='4b:128' NEW_TOKENS=1024 PASSES=100 timeout 150 \
  bash bench/device_kernel_timeline.sh >/dev/null 2>&1
for f in "$OUT"/timeline*; do mv "$f" "$OUT/call2-warp-${f##*/}"; done
grep -A12 "one layer" "$OUT/call2-warp-timeline.txt"
