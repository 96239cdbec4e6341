#!/usr/bin/env bash
# Where one attention launch at 1 sequence (or SEQUENCES) spends its time (issue 6: ~14 us per
# layer at ~1,000 keys for ~4 MB of KV cache), after bench/device_prepare.sh here (carry
# ".device"): Nsight Compute's full section set on ATTN_LAUNCHES launches of the attention kernel
# in a `dice engine bench` run without graphs (random bf16 weights in the MODEL shape, SEQUENCES
# sequences, PROMPT_LENGTH prompt positions), then the details page as text (speed of light,
# memory workload, launch statistics, occupancy, warp state statistics: stall reasons).
#   MODEL=1.7b  SEQUENCES=1  PROMPT_LENGTH=1000  ATTN_SKIP=300 (attention launches skipped: the
#   prefill and the warm-up)  ATTN_LAUNCHES=2  KERNEL=attention_mma_pipelined (a regex; it also
#   matches the deep and paired instantiations)  NCU_SECTIONS (e.g. "SpeedOfLight
#   WarpStateStats"): those sections instead of the full set  GPU_MEMORY=40GiB: dice's
#   --gpu-memory (by default the KV cache takes nearly all free memory, and Nsight Compute, which
#   saves and restores device memory between a kernel's replays, fails with "Failed to profile")
# Leaves $OUT/attention-ncu.txt.
set -uo pipefail
source "$(dirname "$0")/common_device.sh"
source "$(dirname "$0")/engine_device.sh"
shape=${MODEL:-1.7b}
exec > >(tee "$OUT/attention-ncu.txt") 2>&1
machine_header
m="$WORK/models/$shape"
mkdir -p "$WORK/models"
if [ ! -f "$m/config.json" ]; then
  random_sdar_model "$shape" "$m" || { echo "model random failed"; exit 1; }
fi
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "no ncu on this machine"; exit 0; }
rep="$WORK/attention"
rm -f "$rep.ncu-rep"
echo "## SDAR-$shape shape, ${SEQUENCES:-1} sequence(s), prompt ${PROMPT_LENGTH:-1000}: kernel ${KERNEL:-attention_mma_pipelined}," \
  "launches ${ATTN_SKIP:-300}+1..+${ATTN_LAUNCHES:-2}"
sections=(--set full)
if [ -n "${NCU_SECTIONS:-}" ]; then
  sections=()
  for s in $NCU_SECTIONS; do sections+=(--section "$s"); done
fi
timeout 400 "$ncu" "${sections[@]}" --kernel-name "regex:${KERNEL:-attention_mma_pipelined}" \
  --launch-skip "${ATTN_SKIP:-300}" --launch-count "${ATTN_LAUNCHES:-2}" -o "$rep" \
  "$DICE" engine bench --model "$m" --sequences "${SEQUENCES:-1}" --new-tokens 64 --store fused \
  --prompt-length "${PROMPT_LENGTH:-1000}" --no-cuda-graphs --no-ceilings --warmup-tokens 16 \
  --gpu-memory "${GPU_MEMORY:-40GiB}" >"$WORK/attention-ncu.log" 2>&1
echo "ncu exit $?"
tail -5 "$WORK/attention-ncu.log"
"$ncu" --import "$rep.ncu-rep" --page details --print-units base 2>&1
