#!/usr/bin/env bash
# Call 1: the backend and folded-GEMM tests after the host-only changes of the last session
# (83b0914, d318179, bdd8c07), then the deep paired attention's (8 warps, the default) warp stall
# reasons per issued instruction inside SDAR-4B's 16-sequence decoding (fused store, ~1,000
# positions) and in the timing test's graph replays (16 x 1,024), side by side.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
source bench/common_device.sh
PROBE=call1
probe_unpack_tests
start=$SECONDS
probe_checks 200 'CudaBackendTest.*:CudaOps.FoldedGemm*:CudaOps.WgmmaGemmNormFold*'
echo "checks took $((SECONDS - start)) s"
m="$WORK/models/4b"
mkdir -p "$WORK/models"
[ -f "$m/config.json" ] || "$DICE" model random --config .device/shared/configs/sdar-4b-chat.json --dtype bf16 --out "$m" --no-tokenizer --threads "$(nproc)" --force >/dev/null
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
stalls=""
for r in barrier long_scoreboard short_scoreboard wait membar mio_throttle lg_throttle math_pipe_throttle not_selected selected no_instruction dispatch_stall branch_resolving sleeping drain imc_miss tex_throttle; do
  stalls="$stalls,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
metrics="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active$stalls"
flags=()
for x in ${metrics//,/ }; do [ "$x" = gpu__time_duration.sum ] || flags+=(--metric "$x"); done
start=$SECONDS
f="$OUT/$PROBE-ncu-stalls-decoding.csv"
timeout 220 "$ncu" --clock-control none --cache-control none --metrics "$metrics" \
  --csv --kernel-name regex:attention --launch-skip 1800 --launch-count 150 \
  "$DICE" engine bench --model "$m" --sequences 16 --new-tokens 64 --store fused \
  --prompt-length 1000 --no-cuda-graphs --no-ceilings --warmup-tokens 48 > "$f" 2>"$f.err"
echo "ncu decoding exit $? in $((SECONDS - start)) s"
python3 bench/engine_profile_report.py "$f" --keep-templates "${flags[@]}" | tee "$OUT/$PROBE-ncu-stalls-decoding.txt"
start=$SECONDS
f="$OUT/$PROBE-ncu-stalls-timing-test.csv"
DICE_ATTENTION_TIMINGS=1 DICE_ATTENTION_SEQUENCES=16 DICE_ATTENTION_CONTEXTS=1024 \
  timeout 150 "$ncu" --clock-control none --cache-control none --metrics "$metrics" --csv \
  --kernel-name-base demangled --kernel-name 'regex:pipelined_kernel<128, 1, [^,]*, 8>' \
  --launch-skip 320 --launch-count 12 \
  .device/dice_engine_cuda_tests --gtest_filter=CudaOps.AttentionTimings > "$f" 2>"$f.err"
echo "ncu timing test exit $? in $((SECONDS - start)) s"
python3 bench/engine_profile_report.py "$f" --keep-templates "${flags[@]}" | tee "$OUT/$PROBE-ncu-stalls-timing-test.txt"
tail -3 "$f.err"
