#!/usr/bin/env bash
# Call 5: where the attention with its own q/k norm + RoPE spends the ~12 us a launch it takes
# over the deep kernel (calls 2-4): Nsight Compute's stall samples by instruction of one launch at
# call 2's point (pages-first order, the default of the experiment).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
source bench/common_device.sh
source bench/engine_device.sh
PROBE=call5
m="$WORK/models/1.7b"
mkdir -p "$WORK/models"
"$DICE" model random --config "$root/.device/shared/configs/sdar-1.7b-chat.json" --dtype bf16 \
  --out "$m" --no-tokenizer --threads "$(nproc)" --force >/dev/null
probe_source qk-on 'attention_mma_pipelined' 1205 -- \
  "$DICE" engine bench --model "$m" --sequences 16 --new-tokens 64 --store fused \
  --prompt-length 1000 --no-cuda-graphs --no-ceilings --warmup-tokens 16 --gpu-memory 40GiB
