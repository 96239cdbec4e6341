#!/usr/bin/env bash
# Call 5: the attention's shortest split range (--attention-min-split-keys, default 256) and most
# splits (--attention-max-splits, default 8) at 1 sequence, where the attention is latency-bound
# (7-8 us a layer for ~2.5 MB of K/V, ../2026-11-29-fused-mlp-h200): SDAR-1.7B and -4B 1 x 1,024.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call5
V=' ;--attention-min-split-keys 128;--attention-min-split-keys 64;--attention-min-split-keys 128 --attention-max-splits 16'
MODELS=1.7b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=150 probe_variants splits-1.7b "$V"
MODELS=4b SEQUENCES=1 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=200 probe_variants splits-4b "$V"
