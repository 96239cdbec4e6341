#!/usr/bin/env bash
# Call 2: Nsight Compute sections on the deep attention kernel at 16 sequences; the attention
# kernels' per-launch times at 16 and 128 sequences.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -x .device/dice_engine_cuda_tests ] || { xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests; }
source bench/common_device.sh
source bench/engine_device.sh
start=$SECONDS
{ machine_header; DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=16,128 DICE_ATTENTION_CONTEXTS=640,2560 \
  timeout 200 "$TESTS" --gtest_filter='CudaOps.AttentionTimings' 2>&1 | grep -v '^\[' ; } > "$OUT/call2-attention-timings.txt" 2>&1
cat "$OUT/call2-attention-timings.txt"
echo "timings took $((SECONDS - start)) s"
start=$SECONDS
NCU_SECTIONS="SpeedOfLight MemoryWorkloadAnalysis LaunchStats Occupancy WarpStateStats SchedulerStats ComputeWorkloadAnalysis" \
  MODEL=1.7b SEQUENCES=16 PROMPT_LENGTH=576 ATTN_SKIP=900 ATTN_LAUNCHES=1 timeout 200 bash bench/device_attention_ncu.sh > /dev/null 2>&1
cp "$OUT/attention-ncu.txt" "$OUT/call2-attention-ncu-16.txt"
grep -iE "ncu exit|Duration|DRAM Throughput|Memory Throughput|Stall|Registers Per|Achieved Occupancy|Grid Size|Block Size|Dynamic Shared|One or More|No Eligible|Active Warps|Eligible Warps|Issued Warp" "$OUT/call2-attention-ncu-16.txt" | head -40
echo "ncu took $((SECONDS - start)) s"
