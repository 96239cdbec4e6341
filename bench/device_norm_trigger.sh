#!/usr/bin/env bash
# EXPERIMENT (removed with the trace code): tokens/s at 1 sequence with the RMSNorm kernel's
# trigger after its wait (0, the default), after its row loads (1) or at its exit (2), ABAB in
# one call; then one traced run with mode 1. Leaves $OUT/norm-trigger.txt, trace-report-*.txt.
set -uo pipefail
source "$(dirname "$0")/common_device.sh"
mkdir -p "$WORK/models"
exec > >(tee "$OUT/norm-trigger.txt") 2>&1
machine_header
for m in ${MODELS:-1.7b,4b}; do :; done
for m in ${MODELS//,/ }; do
  "$DICE" model random --config .device/shared/configs/sdar-$m-chat.json --dtype bf16 \
    --out "$WORK/models/$m" --no-tokenizer --threads 16 --force >/dev/null
  for round in $(seq 1 "${REPEATS:-3}"); do
    for mode in ${MODES:-0 1 2}; do
      [ "$SECONDS" -lt "${LIMIT:-480}" ] || continue
      DICE_NORM_TRIGGER=$mode "$DICE" engine bench --model "$WORK/models/$m" --sequences 1 \
        --new-tokens "${NEW_TOKENS:-1024}" --store fused --no-ceilings --json "$WORK/r.jsonl" \
        >/dev/null 2>&1
      tps=$(tail -1 "$WORK/r.jsonl" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["tokens_per_second"],1))')
      echo "SDAR-$m round $round mode $mode: $tps tok/s"
    done
  done
  if [ -n "${TRACE_MODE:-}" ]; then
    rm -f "$WORK/trace-$m.txt"
    DICE_NORM_TRIGGER=$TRACE_MODE DICE_KERNEL_TRACE=600,1 DICE_KERNEL_TRACE_OUT="$WORK/trace-$m.txt" \
      "$DICE" engine bench --model "$WORK/models/$m" --sequences 1 --new-tokens 1024 --store fused \
      --no-ceilings --json "$WORK/t.jsonl" >/dev/null 2>&1
    python3 bench/kernel_trace_report.py "$WORK/trace-$m.txt" 16 >"$OUT/trace-report-$m-mode$TRACE_MODE.txt"
  fi
done
