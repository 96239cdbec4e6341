#!/usr/bin/env bash
# Kernel timelines of `dice engine bench` (issue 6): where a forward's time goes with CUDA graphs
# and programmatic dependent launch as they run, which neither Nsight Compute (it serialises
# kernels) nor Nsight Systems (not on the device image) shows. After
# `STAGE=engine TIMELINE=1 bench/device_prepare.sh` here (carry ".device"). Each configuration
# runs twice in one call: plain (its tokens/s) and under engine/cuda's CUPTI injection library
# (every kernel's GPU start and end); then bench/kernel_timeline_report.py's tables.
#   CONFIGS='4b:1 1.7b:1 1.7b:16'   MODEL:SEQUENCES pairs
#   NEW_TOKENS=256  STORE=fused  PASSES=200 (the report's last steady passes)
#   OPTIONS='...'                   more `engine bench` options for both runs
# Leaves $OUT/timeline-MODEL-SEQUENCES.{csv.gz,txt,jsonl} and $OUT/timeline.txt (all reports).
set -uo pipefail
source "$(dirname "$0")/common_device.sh"
source "$(dirname "$0")/engine_device.sh"
library="$root/.device/timeline/libdice_kernel_timeline.so"
[ -f "$library" ] || { echo "no $library: stage with TIMELINE=1 bench/device_prepare.sh"; exit 2; }
dir="$WORK/timeline"
rm -rf "$dir"
mkdir -p "$dir" "$WORK/models"
exec > >(tee "$OUT/timeline.txt") 2>&1
machine_header
for config in ${CONFIGS:-4b:1 1.7b:1 1.7b:16}; do
  shape=${config%%:*} sequences=${config##*:}
  name="timeline-$shape-$sequences"
  m="$WORK/models/$shape"
  [ -d "$m" ] || random_sdar_model "$shape" "$m" || { echo "SDAR-$shape: model random failed"; continue; }
  run() {
    # shellcheck disable=SC2086  # OPTIONS is split into its words on purpose
    "$DICE" engine bench --model "$m" --sequences "$sequences" --new-tokens "${NEW_TOKENS:-256}" \
      --store "${STORE:-fused}" --sustained-gemm-seconds 0 ${OPTIONS:-} \
      --json "$OUT/$name.jsonl" >/dev/null 2>"$dir/err-$name.txt" ||
      { echo "$name: exit $?"; tail -3 "$dir/err-$name.txt"; }
  }
  run
  LD_LIBRARY_PATH="$(dirname "$library"):${LD_LIBRARY_PATH:-}" CUDA_INJECTION64_PATH="$library" \
    DICE_KERNEL_TIMELINE="$dir/$name.csv" run
  grep "kernel_timeline" "$dir/err-$name.txt"
  "$DICE_PYTHON" "$root/bench/kernel_timeline_report.py" "$dir/$name.csv" \
    --passes "${PASSES:-200}" --bench "$OUT/$name.jsonl" | tee "$OUT/$name.txt"
  gzip -c "$dir/$name.csv" >"$OUT/$name.csv.gz"
done
