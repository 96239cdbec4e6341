#!/usr/bin/env bash
# KernelBench's own evaluation against `dice eval` on the same candidates (issue 4), on the device
# after bench/device_prepare.sh (which stages KernelBench in .device/kernelbench, ninja in
# .device/bin, the dice binary and the data). One side per device call:
#   bench/kernelbench_vs_dice.sh kernelbench 12   KernelBench's eval_kernel_against_ref, 12
#                                                  candidates one after another (~45 s each)
#   bench/kernelbench_vs_dice.sh dice 100          dice eval on 100 candidates, cold cache
# Each side stops itself BUDGET seconds (default 540) after it starts, so that what finished is
# reported. POLICY (dice side; default lenient): dice eval's --policy; lenient accepts library
# calls (cuBLAS, cuDNN) as KernelBench does, so both sides evaluate the same candidates (strict
# rejects those before building, which makes dice's side shorter for a different reason). Both sides take the first N of the same seeded order (SEED, default 2026). Leaves
# $OUT/kernelbench.json or $OUT/dice.json and a log; compare them anywhere (no GPU needed) with
#   .venv/bin/python bench/kernelbench_vs_dice.py report --out DIR_WITH_BOTH_JSON_FILES
set -euo pipefail
source "$(dirname "$0")/common_device.sh"
side=${1:?usage: kernelbench_vs_dice.sh kernelbench|dice [LIMIT]}
limit=${2:-100}
export PATH="$root/.device/bin:$PATH"
machine_header | tee "$OUT/kb_vs_dice.$side.machine.txt"
set +e
$DICE_PYTHON "$root/bench/kernelbench_vs_dice.py" "$side" --limit "$limit" --seed "${SEED:-2026}" \
  --budget "${BUDGET:-540}" --kernelbench "$root/.device/kernelbench" \
  --pairs "$root/.device/shared/infilling_eval_99.jsonl" --dice "$DICE" \
  --work "$WORK/kb_vs_dice" --out "$OUT" --dice-args --policy "${POLICY:-lenient}" 2>&1 |
  tee "$OUT/kb_vs_dice.$side.log"
status=${PIPESTATUS[0]}
set -e
echo "exit status: $status" | tee -a "$OUT/kb_vs_dice.$side.machine.txt"
exit "$status"
