#!/usr/bin/env bash
# Call 4: where a forward's time goes now, per kernel (Nsight Compute: duration and DRAM
# throughput, kernels serialised, caches not flushed), for the rows nearest issue 6's 1.5x:
# SDAR-1.7B at 16 sequences, ~2,000 positions, unfused store; SDAR-4B at 1 sequence, ~600.
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice.xz > .device/dice && chmod +x .device/dice
source bench/device_probe_lib.sh
source bench/common_device.sh
source bench/engine_device.sh
PROBE=call4
ncu=$(probe_ncu)
profile() {  # NAME MODEL COUNT SKIP ARGS...
  local name=$1 model=$2 count=$3 skip=$4 f="$OUT/$PROBE-kernels-$1.csv" m="$WORK/models/$2"
  shift 4
  mkdir -p "$WORK/models"
  [ -d "$m" ] || "$DICE" model random --config "$root/.device/shared/configs/sdar-$model-chat.json" \
    --dtype bf16 --out "$m" --no-tokenizer --threads "$(nproc)" --force >/dev/null
  timeout 200 "$ncu" --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    --csv --kernel-name-base mangled --launch-skip "$skip" --launch-count "$count" \
    "$DICE" engine bench --model "$m" --no-cuda-graphs --no-ceilings --warmup-tokens 16 \
    --gpu-memory 40GiB "$@" >"$f" 2>"$f.err"
  echo "ncu $name: exit $?"
  grep -m3 ERROR "$f.err"
  python3 bench/engine_profile_report.py "$f" --keep-templates \
    --metric dram__throughput.avg.pct_of_peak_sustained_elapsed | tee "$OUT/$PROBE-kernels-$name.txt"
  gzip -f "$f"
}
profile 1.7b-16-2000 1.7b 480 6000 --sequences 16 --new-tokens 64 --store unfused --prompt-length 2000
profile 4b-1-600 4b 600 3000 --sequences 1 --new-tokens 256 --store fused --prompt-length 600
