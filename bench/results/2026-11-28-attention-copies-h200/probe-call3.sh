#!/usr/bin/env bash
# Call 3: the deep attention kernel's K/V pages by bulk copies (one per row): its tests, its
# per-launch time against the cp.async build (ABAB), tokens/s at 16 sequences, then Nsight
# Compute on both builds' deep kernel at 16 sequences.
set -uo pipefail
cd "$(dirname "$0")/.."
for b in dice_engine_cuda_tests tests_bulk dice_bulk; do
  [ -x .device/$b ] || { xz -dc .device/$b.xz > .device/$b && chmod +x .device/$b; }
done
source bench/common_device.sh
source bench/engine_device.sh
start=$SECONDS
{ machine_header; timeout 150 .device/tests_bulk --gtest_filter='CudaOps.Attention*:CudaBackendTest.*' --gtest_brief=1 2>&1 | tail -15; } > "$OUT/call3-tests-bulk.txt" 2>&1
cat "$OUT/call3-tests-bulk.txt" | tail -8
echo "tests took $((SECONDS - start)) s"
start=$SECONDS
for round in 1 2; do
  for b in dice_engine_cuda_tests tests_bulk; do
    echo "## $b round $round"
    DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=16 DICE_ATTENTION_CONTEXTS=640,2560 \
      timeout 100 .device/$b --gtest_filter='CudaOps.AttentionTimings' 2>&1 | grep -E '^(model|1.7b|4b) '
  done
done > "$OUT/call3-attention-timings.txt" 2>&1
cat "$OUT/call3-attention-timings.txt"
echo "timings took $((SECONDS - start)) s"
start=$SECONDS
MODELS=1.7b SEQUENCES=16 NEW_TOKENS=1024 REPEATS=2 VARIANTS_LIMIT=120 \
  VARIANTS=';bin=.device/dice_bulk' bash bench/device_engine_variants.sh > /dev/null 2>&1
cp "$OUT/engine-variants.txt" "$OUT/call3-variants-16.txt"; cp "$OUT/engine-variants.jsonl" "$OUT/call3-variants-16.jsonl"
grep -A20 "mean tokens" "$OUT/call3-variants-16.txt"
echo "variants took $((SECONDS - start)) s"
for b in dice dice_bulk; do
  start=$SECONDS
  DICE=$root/.device/$b NCU_SECTIONS="SpeedOfLight MemoryWorkloadAnalysis LaunchStats Occupancy WarpStateStats SchedulerStats" \
    MODEL=1.7b SEQUENCES=16 PROMPT_LENGTH=576 ATTN_SKIP=900 ATTN_LAUNCHES=1 timeout 110 bash bench/device_attention_ncu.sh > /dev/null 2>&1
  cp "$OUT/attention-ncu.txt" "$OUT/call3-attention-ncu-16-$b.txt"
  grep -iE "ncu exit|^ *Duration|DRAM Throughput|Stall|No Eligible|Issued Warp" "$OUT/call3-attention-ncu-16-$b.txt" | head -12
  echo "ncu $b took $((SECONDS - start)) s"
done
