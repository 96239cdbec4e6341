#!/usr/bin/env bash
# Real-input runs of issue 2 on the device (after bench/device_prepare.sh).
#   bench/device_eval.sh pairs99      the 99 DICE PyTorch/CUDA pairs, default protocol (PAIRS=FILE:
#                                     another JSONL of pairs, e.g. the ones an interrupted run left)
#   bench/device_eval.sh calibration  KernelBench L1, each problem's reference as its candidate
# Extra arguments go to dice eval. Leaves $OUT/STEP.report.txt and $OUT/STEP.tar.gz.
set -euo pipefail
source "$(dirname "$0")/common_device.sh"
step=${1:?usage: device_eval.sh pairs99|calibration [dice eval options]}
shift
machine_header | tee "$WORK/$step.machine.txt"
start=$SECONDS
trap 'pack_step "$step"' EXIT
case "$step" in
  pairs99)
    "$DICE" eval --candidates "${PAIRS:-$root/.device/shared/infilling_eval_99.jsonl}" \
      --device cuda --out-dir "$WORK/$step" "$@" 2> >(tee "$WORK/$step.log" >&2)
    ;;
  calibration)
    "$DICE" eval kernelbench:L1 --kernelbench "$root/.device/shared/kernelbench.jsonl" \
      --reference-as-candidate --device cuda --out-dir "$WORK/$step" "$@" \
      2> >(tee "$WORK/$step.log" >&2)
    ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
esac
echo "wall time of dice eval: $((SECONDS - start)) s" | tee -a "$WORK/$step.machine.txt"
{ cat "$WORK/$step.machine.txt"; $DICE_PYTHON "$root/bench/records_report.py" "$WORK/$step/records.jsonl"; } \
  | tee "$OUT/$step.report.txt"
