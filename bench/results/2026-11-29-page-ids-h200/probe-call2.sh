#!/usr/bin/env bash
# Call 2: call 1's Nsight Compute runs again (call 1's metric list failed to profile the attention
# in decoding, exit 9; its timing-test kernel filter matched nothing): the WarpStateStats
# section's own metrics (raw page); the timing test's kernel by its mangled name.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/common_device.sh
PROBE=call2
xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests
m="$WORK/models/4b"
mkdir -p "$WORK/models"
[ -f "$m/config.json" ] || "$DICE" model random --config .device/shared/configs/sdar-4b-chat.json --dtype bf16 --out "$m" --no-tokenizer --threads "$(nproc)" --force >/dev/null
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
"$ncu" --query-metrics --chip gh100 2>/dev/null | grep -E "issue_stalled" | head -60 > "$OUT/$PROBE-stall-metrics.txt"
wc -l < "$OUT/$PROBE-stall-metrics.txt"
report() {
  local f=$1 flags=()
  for x in $(grep -oE '"smsp__[a-z_]*(issue_stalled|issue_active|warps_issue)[a-z_.]*"' "$f" | tr -d '"' | sort -u); do flags+=(--metric "$x"); done
  python3 bench/engine_profile_report.py "$f" --keep-templates "${flags[@]}"
}
start=$SECONDS
f="$OUT/$PROBE-ncu-stalls-decoding.csv"
timeout 200 "$ncu" --clock-control none --cache-control none --section WarpStateStats --page raw \
  --csv --kernel-name regex:attention --launch-skip 1800 --launch-count 100 \
  "$DICE" engine bench --model "$m" --sequences 16 --new-tokens 64 --store fused \
  --prompt-length 1000 --no-cuda-graphs --no-ceilings --warmup-tokens 48 > "$f" 2>"$f.err"
echo "ncu decoding exit $? in $((SECONDS - start)) s"; grep ERROR "$f.err" | head -3
report "$f" > "$OUT/$PROBE-ncu-stalls-decoding.txt"; cut -c1-400 "$OUT/$PROBE-ncu-stalls-decoding.txt"
start=$SECONDS
f="$OUT/$PROBE-ncu-stalls-timing-test.csv"
# SDAR-4B's deep_pair8 launches: past SDAR-1.7B's 309 (1 + 11 graph replays x 28 nodes).
DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=16 DICE_ATTENTION_CONTEXTS=1024 \
  timeout 150 "$ncu" --clock-control none --cache-control none --section WarpStateStats --page raw --csv \
  --kernel-name-base mangled --kernel-name regex:pipelined_kernelILi128ELi1ELb1ELi8E \
  --launch-skip 320 --launch-count 12 \
  .device/dice_engine_cuda_tests --gtest_filter=CudaOps.AttentionTimings > "$f" 2>"$f.err"
echo "ncu timing test exit $? in $((SECONDS - start)) s"; grep ERROR "$f.err" | head -3
report "$f" > "$OUT/$PROBE-ncu-stalls-timing-test.txt"; cut -c1-400 "$OUT/$PROBE-ncu-stalls-timing-test.txt"
