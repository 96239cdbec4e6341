#!/usr/bin/env bash
# Call 10: EXPERIMENT, the deep paired kernel with 6 and 8 warps a block (3 / 4 warp pairs, rings
# of 4 / 2 pages; --deep-attention-pairs-warps): its test (reference and same bits twice),
# per-launch times on the store passes' shape, tokens/s at SDAR-4B 16 x 4,096 (4, 6, 8 warps,
# from 1,536 positions) and at 16 x 1,024 from 0 positions (6, 8 warps, against none).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call10
probe_unpack_tests
timeout 100 .device/dice_engine_cuda_tests --gtest_filter='CudaOps.DeepPaired*' > "$OUT/$PROBE-tests.txt" 2>&1
grep -E "^\[  (FAILED|     OK|  PASSED)" "$OUT/$PROBE-tests.txt"; grep -m3 -A6 "Failure" "$OUT/$PROBE-tests.txt"
DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=16 DICE_ATTENTION_CONTEXTS=1024,2048,4096 \
  timeout 60 .device/dice_engine_cuda_tests --gtest_filter='CudaOps.AttentionTimings' 2>&1 | grep -vE '^\[|^Note|^$' > "$OUT/$PROBE-attention-timings.txt"
cat "$OUT/$PROBE-attention-timings.txt" | cut -c1-20,150-260
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=1 VARIANTS_LIMIT=150 probe_variants 4b-16x4096 ";--deep-attention-pairs-warps 6;--deep-attention-pairs-warps 8"
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=1 VARIANTS_LIMIT=80 probe_variants 4b-16 "--no-deep-attention-pairs;--deep-attention-pairs-min-keys 0 --deep-attention-pairs-warps 6;--deep-attention-pairs-min-keys 0 --deep-attention-pairs-warps 8"
