#!/usr/bin/env bash
# Call 3: (1) call 2's Nsight Compute durations without --attention-qk-norm-rope at the same
# point of the run (the attention and the q/k norm kernel alternate, so twice the launches
# skipped and profiled); (2) the deep kernel's passes on the 8-warp kernel (EXPERIMENT
# --deep-attention-eight-warps) against the 4-warp deep kernel at SDAR-1.7B 16 x 1,024, both
# without the q/k norm + RoPE inside the attention.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
source bench/common_device.sh
source bench/engine_device.sh
PROBE=call3
m="$WORK/models/1.7b"
mkdir -p "$WORK/models"
"$DICE" model random --config "$root/.device/shared/configs/sdar-1.7b-chat.json" --dtype bf16 \
  --out "$m" --no-tokenizer --threads "$(nproc)" --force >/dev/null
probe_stalls "qk-off-matched" 'attention_mma_pipelined|qk_norm_rope' 24 2400 -- \
  "$DICE" engine bench --model "$m" --sequences 16 --new-tokens 64 --store fused \
  --prompt-length 1000 --no-cuda-graphs --no-ceilings --warmup-tokens 16 --gpu-memory 40GiB \
  --no-attention-qk-norm-rope
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=3 VARIANTS_LIMIT=150 \
  probe_variants eight-16 '--no-attention-qk-norm-rope;--no-attention-qk-norm-rope --deep-attention-eight-warps'
STORE=unfused MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=80 \
  probe_variants eight-16-unfused '--no-attention-qk-norm-rope;--no-attention-qk-norm-rope --deep-attention-eight-warps'
