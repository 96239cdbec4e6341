#!/usr/bin/env bash
# Real-input runs on the device (after bench/device_prepare.sh).
#   bench/device_eval.sh pairs99      the 99 DICE PyTorch/CUDA pairs (default policy strict).
#                                     PAIRS=A-B: only pairs A..B (0-based, inclusive) of the 99, as
#                                     step pairs99-A-B, so that the 99 split over several device
#                                     calls; PAIRS=FILE: another JSONL of pairs.
#   bench/device_eval.sh calibration  KernelBench L1 (PROBLEMS=kernelbench:L1/1,... for a subset),
#                                     each problem's reference as its candidate
# DEVICE=cpu (or none) for a dry run here. RESUME=1 continues the step's stored run (results.db in $WORK/STEP, on a machine still warm
# from the call that was stopped): only unfinished candidates run. Extra arguments go to dice eval
# (e.g. --policy lenient). dice eval is stopped after STEP_LIMIT seconds (default 540) so that what
# finished is still reported (and resumable). Leaves $OUT/STEP.report.txt, $OUT/STEP.log and
# $OUT/STEP.tar.gz (records, summaries, worker logs).
set -euo pipefail
source "$(dirname "$0")/common_device.sh"
step=${1:?usage: device_eval.sh pairs99|calibration [dice eval options]}
shift
case "$step" in
  pairs99)
    pairs=$root/.device/shared/infilling_eval_99.jsonl
    if [[ ${PAIRS:-} =~ ^([0-9]+)-([0-9]+)$ ]]; then
      first=${BASH_REMATCH[1]} last=${BASH_REMATCH[2]}
      step=pairs99-$first-$last
      mkdir -p "$WORK"
      sed -n "$((first + 1)),$((last + 1))p" "$pairs" >"$WORK/$step.pairs.jsonl"
      pairs=$WORK/$step.pairs.jsonl
    elif [ -n "${PAIRS:-}" ]; then
      pairs=$PAIRS
    fi
    args=(--candidates "$pairs") ;;
  calibration)
    args=("${PROBLEMS:-kernelbench:L1}" --kernelbench "$root/.device/shared/kernelbench.jsonl"
          --reference-as-candidate) ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
esac
[ "${RESUME:-0}" = 1 ] && args=(--resume)
machine_header | tee -a "$WORK/$step.machine.txt"
start=$SECONDS
trap 'pack_step "$step"' EXIT
set +e
timeout --kill-after=15 "${STEP_LIMIT:-540}" "$DICE" eval "${args[@]}" --device "${DEVICE:-cuda}" \
  --progress lines --out-dir "$WORK/$step" "$@" 2>&1 | tee -a "$OUT/$step.log"
status=${PIPESTATUS[0]}
set -e
echo "dice eval exit status: $status; wall time: $((SECONDS - start)) s" | tee -a "$WORK/$step.machine.txt"
{ cat "$WORK/$step.machine.txt"; $DICE_PYTHON "$root/bench/records_report.py" "$WORK/$step/records.jsonl"; } \
  | tee "$OUT/$step.report.txt"
