#!/usr/bin/env bash
# Call 2: the defaults now 8 warps from 0 positions (attention_deep_pairs_warps 8,
# attention_deep_pairs_min_keys 0): every GPU test of this build (the backend test's deep paired
# prompts: 4 warps at head_dim 64, 4 and 8 at head_dim 128); then SDAR-4B 16 x 4,096 and
# 16 x 1,024 tokens/s, the defaults against the old ones (4 warps from 1,536 positions).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
start=$SECONDS
probe_checks 420 '*'
echo "checks took $((SECONDS - start)) s"
MODELS=4b SEQUENCES=16 NEW_TOKENS=4096 REPEATS=1 VARIANTS_LIMIT=150 probe_variants 4b-16x4096 ";--deep-attention-pairs-warps 4 --deep-attention-pairs-min-keys 1536"
MODELS=4b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=1 VARIANTS_LIMIT=80 probe_variants 4b-16 ";--deep-attention-pairs-warps 4 --deep-attention-pairs-min-keys 1536"
