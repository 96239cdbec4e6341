#!/usr/bin/env bash
# Call 3: the stall reasons inside decoding (calls 1 and 2 failed there, exit 9: with the KV cache
# over the whole GPU, Nsight Compute has no memory to save the kernel's buffers between its
# replay passes; --gpu-memory 16GiB leaves it room, ../2026-11-29-deep-pairs-h200 call 7 found
# the slowdown with it too). Call 1's metric list; then the deep paired kernel's per-instruction
# stall samples (SourceCounters) on 3 launches.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/common_device.sh
PROBE=call3
m="$WORK/models/4b"
mkdir -p "$WORK/models"
[ -f "$m/config.json" ] || "$DICE" model random --config .device/shared/configs/sdar-4b-chat.json --dtype bf16 --out "$m" --no-tokenizer --threads "$(nproc)" --force >/dev/null
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
stalls=""
for r in barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle not_selected selected branch_resolving dispatch_stall no_instruction imc_miss lg_throttle membar; do
  stalls="$stalls,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
metrics="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.per_cycle_active,smsp__inst_executed.sum$stalls"
flags=()
for x in ${metrics//,/ }; do [ "$x" = gpu__time_duration.sum ] || flags+=(--metric "$x"); done
run=("$DICE" engine bench --model "$m" --sequences 16 --new-tokens 64 --store fused
  --prompt-length 1000 --no-cuda-graphs --no-ceilings --warmup-tokens 48 --gpu-memory 16GiB)
start=$SECONDS
f="$OUT/$PROBE-ncu-stalls-decoding.csv"
timeout 200 "$ncu" --clock-control none --cache-control none --metrics "$metrics" \
  --csv --kernel-name regex:attention --launch-skip 1800 --launch-count 120 "${run[@]}" > "$f" 2>"$f.err"
echo "ncu decoding exit $? in $((SECONDS - start)) s"; grep ERROR "$f.err" | head -3
python3 bench/engine_profile_report.py "$f" --keep-templates "${flags[@]}" | tee "$OUT/$PROBE-ncu-stalls-decoding.txt" | cut -c1-330
start=$SECONDS
timeout 150 "$ncu" --clock-control none --cache-control none --section WarpStateStats --section SourceCounters \
  --kernel-name-base mangled --kernel-name regex:pipelined_kernelILi128ELi1ELb1ELi8E --launch-skip 40 --launch-count 2 \
  -o "$OUT/$PROBE-deep-pair8-decoding" "${run[@]}" > "$OUT/$PROBE-source.log" 2>&1
echo "ncu source exit $? in $((SECONDS - start)) s"
timeout 60 "$ncu" -i "$OUT/$PROBE-deep-pair8-decoding.ncu-rep" --page source --csv --print-source sass > "$OUT/$PROBE-deep-pair8-sass.csv" 2>&1
echo "source page exit $?"; wc -c "$OUT/$PROBE-deep-pair8-sass.csv"; head -c 600 "$OUT/$PROBE-deep-pair8-sass.csv"
