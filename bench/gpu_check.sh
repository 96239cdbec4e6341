#!/usr/bin/env bash
# GPU test of the evaluator (run on the device after bench/device_prepare.sh): the bundled examples
# must get the verdicts their file names promise (<problem>.py and __model_output: correct;
# __compile_error: compile_error; __wrong: mismatch). Exits non-zero on any surprise.
set -euo pipefail
source "$(dirname "$0")/common_device.sh"
trap 'pack_step gpu_check' EXIT
machine_header
"$DICE" eval "$root/examples/problems" --candidates "$root/examples/candidates" \
  --device cuda --out-dir "$WORK/gpu_check" "$@"
$DICE_PYTHON "$root/bench/records_report.py" "$WORK/gpu_check/records.jsonl" --expect-by-name \
  | tee "$OUT/gpu_check.report.txt"
