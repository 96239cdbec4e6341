#!/usr/bin/env bash
# Call 4: the attention's q/k norm + RoPE with the first pages' copies issued after it (EXPERIMENT
# --no-attention-qk-pages-first; call 3 read the prologue's loads as queued behind ~190 KB of page
# copies per SM): Nsight Compute durations at call 2's point, then tokens/s at SDAR-1.7B
# 16 x 1,024 against the separate q/k kernel and the pages-first order.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
source bench/common_device.sh
source bench/engine_device.sh
PROBE=call4
m="$WORK/models/1.7b"
mkdir -p "$WORK/models"
"$DICE" model random --config "$root/.device/shared/configs/sdar-1.7b-chat.json" --dtype bf16 \
  --out "$m" --no-tokenizer --threads "$(nproc)" --force >/dev/null
probe_stalls "qk-after" 'attention_mma_pipelined|qk_norm_rope' 12 1200 -- \
  "$DICE" engine bench --model "$m" --sequences 16 --new-tokens 64 --store fused \
  --prompt-length 1000 --no-cuda-graphs --no-ceilings --warmup-tokens 16 --gpu-memory 40GiB \
  --no-attention-qk-pages-first
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=200 \
  probe_variants after-16 '--no-attention-qk-norm-rope;--no-attention-qk-pages-first; '
