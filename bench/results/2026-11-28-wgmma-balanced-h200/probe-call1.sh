#!/usr/bin/env bash
# Call 1: how many of the wgmma GEMM's clusters can be resident at once for the 64-row layer
# shapes (SDAR-4B down is ~0.6 of the copy rate on every tile and split), and Nsight Compute's
# per-SM spread (active cycles, blocks launched) of the engine's 4B down launch against cuBLASLt's.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/common_device.sh
source bench/engine_device.sh
xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests
begin_test_report call1-wgmma-clusters.txt
nvidia-smi --query-gpu=name,uuid,clocks.max.sm,clocks.max.mem --format=csv
for shape in "4b down" "4b gate_up" "4b o" "4b qkv" "1.7b down" "1.7b gate_up"; do
  DICE_SKINNY_TIMINGS=1 DICE_SKINNY_ROWS=64 DICE_SKINNY_SHAPE="$shape" DICE_SKINNY_WGMMA_ONLY=1 \
    timeout 60 "$TESTS" --gtest_filter=CudaOps.SkinnyGemmTimings 2>&1 | grep -vE '^\[|^Note|^$|^Running|^copy|^shape'
done
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $ncu"
"$ncu" --query-metrics --chip gh100 2>/dev/null | grep -E "^(sm__ctas_launched|sm__cycles_active|sm__warps_active|launch__cluster)" | head -20
metrics=gpu__time_duration.sum,sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum
if "$ncu" --query-metrics --chip gh100 2>/dev/null | grep -q "^sm__ctas_launched"; then
  metrics="$metrics,sm__ctas_launched.min,sm__ctas_launched.max,sm__ctas_launched.sum"
fi
for spec in "4b down:64:4" "4b down:128:7" "4b gate_up:64:1" "1.7b down:64:3"; do
  IFS=: read -r shape tile splits <<<"$spec"
  echo "== ncu wgmma $shape t$tile s$splits"
  DICE_SKINNY_TIMINGS=1 DICE_SKINNY_ROWS=64 DICE_SKINNY_SHAPE="$shape" DICE_SKINNY_WGMMA_ONLY=1 \
    DICE_SKINNY_WGMMA_TILES=$tile DICE_SKINNY_WGMMA_SPLITS=$splits \
    timeout 90 "$ncu" --metrics "$metrics" -k regex:wgmma --launch-skip 1 --launch-count 3 --csv --page raw \
    "$TESTS" --gtest_filter=CudaOps.SkinnyGemmTimings 2>&1 | grep -E '^"' | tail -4
done
for shape in "4b down" "4b gate_up"; do
  echo "== ncu cublaslt $shape"
  DICE_SKINNY_TIMINGS=1 DICE_SKINNY_ROWS=64 DICE_SKINNY_SHAPE="$shape" \
    timeout 90 "$ncu" --metrics "$metrics" -k regex:'gemm|nvjet|xmma|cutlass' --launch-skip 1 --launch-count 3 --csv --page raw \
    "$TESTS" --gtest_filter=CudaOps.SkinnyGemmTimings 2>&1 | grep -E '^"' | tail -4
done
