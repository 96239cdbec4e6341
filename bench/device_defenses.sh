#!/usr/bin/env bash
# The defences suite of issue 3 on the device (after bench/device_prepare.sh), one command:
#   1. the honest candidates and the cheats of evaluator/defenses under --policy strict (one dice
#      eval call; everything compiles in parallel, statically rejected cheats are never built);
#   2. the isolation attacks under --policy kernelbench (static rules off, so that the sandbox
#      meets them; Python only, nothing to compile).
# Every verdict is checked against evaluator/defenses/manifest.json by bench/defenses_check.py;
# exits non-zero on any surprise. Leaves $OUT/defenses.report.txt, $OUT/defenses.log and
# $OUT/defenses.tar.gz (records, summaries, worker logs). Extra arguments go to both dice calls.
set -euo pipefail
source "$(dirname "$0")/common_device.sh"
step=defenses
machine_header | tee "$WORK/$step.machine.txt"
start=$SECONDS
trap 'pack_step "$step"' EXIT
suite=$root/evaluator/defenses
candidates=$WORK/$step/candidates
rm -rf "$WORK/$step" && mkdir -p "$candidates"
cp "$suite"/honest/*.py "$suite"/cheats/*.py "$candidates"/
set +e
# Timing only needs to be long enough for the timing.* rules and the re-checked timed calls.
timeout --kill-after=15 "${STEP_LIMIT:-420}" "$DICE" eval "$suite/problems" --candidates "$candidates" \
  --device "${DEVICE:-cuda}" --policy strict --timing-trials 30 --warmup 3 --out-dir "$WORK/$step/strict" "$@" \
  2>&1 | tee "$OUT/$step.log"
strict_status=${PIPESTATUS[0]}
timeout --kill-after=15 "${ATTACK_LIMIT:-150}" "$DICE" eval "$suite/problems" \
  --candidates "$suite/attacks" --device "${DEVICE:-cuda}" --policy kernelbench --correct-trials 1 \
  --timing-trials 5 --warmup 1 --timeout-correctness 30 --memory-limit 16 \
  --out-dir "$WORK/$step/attacks" "$@" 2>&1 | tee -a "$OUT/$step.log"
attack_status=${PIPESTATUS[0]}
set -e
echo "dice eval exit status: strict $strict_status, attacks $attack_status; wall time: $((SECONDS - start)) s" \
  | tee -a "$WORK/$step.machine.txt"
{
  cat "$WORK/$step.machine.txt"
  $DICE_PYTHON "$root/bench/defenses_check.py" "$suite/manifest.json" \
    "$WORK/$step/strict/records.jsonl" "$WORK/$step/attacks/records.jsonl"
} | tee "$OUT/$step.report.txt"
exit "${PIPESTATUS[0]}"
