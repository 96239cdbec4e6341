#!/usr/bin/env bash
# Real-input runs of issue 2 on the device (after bench/device_prepare.sh).
#   bench/device_eval.sh pairs99      the 99 DICE PyTorch/CUDA pairs, default protocol (PAIRS=FILE:
#                                     another JSONL of pairs, e.g. the ones an interrupted run left)
#   bench/device_eval.sh calibration  KernelBench L1 (PROBLEMS=kernelbench:L1/1,... for a subset),
#                                     each problem's reference as its candidate
# Extra arguments go to dice eval. dice eval is stopped after STEP_LIMIT seconds (default 540) so
# that what finished is still reported. Leaves $OUT/STEP.report.txt, $OUT/STEP.log and
# $OUT/STEP.tar.gz (records, summaries, worker logs).
set -euo pipefail
source "$(dirname "$0")/common_device.sh"
step=${1:?usage: device_eval.sh pairs99|calibration [dice eval options]}
shift
machine_header | tee "$WORK/$step.machine.txt"
start=$SECONDS
trap 'pack_step "$step"' EXIT
case "$step" in
  pairs99)
    args=(--candidates "${PAIRS:-$root/.device/shared/infilling_eval_99.jsonl}") ;;
  calibration)
    args=("${PROBLEMS:-kernelbench:L1}" --kernelbench "$root/.device/shared/kernelbench.jsonl"
          --reference-as-candidate) ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
esac
set +e
timeout --kill-after=15 "${STEP_LIMIT:-540}" "$DICE" eval "${args[@]}" --device cuda \
  --out-dir "$WORK/$step" "$@" 2>&1 | tee "$OUT/$step.log"
status=${PIPESTATUS[0]}
set -e
pkill -f dice_worker 2>/dev/null || true  # workers of a stopped run
echo "dice eval exit status: $status; wall time: $((SECONDS - start)) s" | tee -a "$WORK/$step.machine.txt"
{ cat "$WORK/$step.machine.txt"; $DICE_PYTHON "$root/bench/records_report.py" "$WORK/$step/records.jsonl"; } \
  | tee "$OUT/$step.report.txt"
