#!/usr/bin/env bash
# Call 2: why the attention with its own q/k norm + RoPE lost 8-9% at 16 sequences (call 1):
# Nsight Compute durations and warp stalls of the attention (and q/k norm) launches of SDAR-1.7B
# at 16 sequences, ~1,000 positions, with and without --attention-qk-norm-rope.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
source bench/common_device.sh
source bench/engine_device.sh
PROBE=call2
m="$WORK/models/1.7b"
mkdir -p "$WORK/models"
"$DICE" model random --config "$root/.device/shared/configs/sdar-1.7b-chat.json" --dtype bf16 \
  --out "$m" --no-tokenizer --threads "$(nproc)" --force >/dev/null
for v in on off; do
  flag=""
  [ "$v" = off ] && flag=--no-attention-qk-norm-rope
  probe_stalls "qk-$v" 'attention_mma_pipelined|qk_norm_rope' 12 1200 -- \
    "$DICE" engine bench --model "$m" --sequences 16 --new-tokens 64 --store fused \
    --prompt-length 1000 --no-cuda-graphs --no-ceilings --warmup-tokens 16 --gpu-memory 40GiB $flag
done
