#!/usr/bin/env bash
# `dice bench` on real input, on the device (after scripts/build.sh with CUDA and
# bench/device_prepare.sh; carry ".device").
#   bench/device_bench.sh e2e     all 250 KernelBench problems, one sample each, through the whole
#                                 pipeline (generation on the CUDA backend, extraction, compile,
#                                 GPU evaluation, report) with a random-weight SDAR-1.7B-shaped
#                                 checkpoint made on the device: it scores zero; the point is
#                                 that it runs end to end and reports wall time per stage.
#                                 MAX_NEW_TOKENS (default 256) bounds each output.
#   bench/device_bench.sh infill  the 99 infilling records in infill mode with --oracle-middle,
#                                 then `dice eval` on the same 99 kernels (DICE pairs), then the
#                                 comparison of verdicts (bench/bench_compare.py). Each part is
#                                 resumable: call again until it prints "agreement"; the runs live
#                                 in out/device-bench/ of the device's working copy, kept while the
#                                 machine stays warm. INFILL_LIMIT=N: the first N records only.
# Each dice run stops after STEP_LIMIT seconds (default 540) so that what finished is reported.
# Leaves $OUT/STEP.report.txt, $OUT/STEP.log and $OUT/STEP.tar.gz (reports, summaries, logs).
set -euo pipefail
source "$(dirname "$0")/common_device.sh"
source "$(dirname "$0")/engine_device.sh"
step=${1:?usage: device_bench.sh e2e|infill}
shift
RUNS=$root/out/device-bench
mkdir -p "$RUNS" "$WORK/$step"
export PATH="$root/.device/bin:$PATH"  # ninja for load_inline
machine_header | tee "$WORK/$step/machine.txt"
start=$SECONDS
trap 'pack_step "$step"' EXIT
deadline=$((start + ${STEP_LIMIT:-540}))
left() { echo $((deadline - SECONDS)); }
missing=$(missing_libraries)
[ -z "$missing" ] || { echo "missing libraries: $missing" | tee -a "$OUT/$step.log"; exit 1; }

# run_dice NAME ARGS...: dice ARGS under the remaining time; "resume" when NAME's run exists.
run_dice() {
  local name=$1
  shift
  if [ "$(left)" -lt 15 ]; then
    echo "$name: no time left in this call" | tee -a "$WORK/$step/machine.txt"
    return 124
  fi
  set +e
  timeout --kill-after=15 "$(left)" bash -c 'LD_LIBRARY_PATH="$DICE_LD_PATH" "$@"' _ "$DICE" "$@" \
    2>&1 | tee -a "$OUT/$step.log"
  local status=${PIPESTATUS[0]}
  set -e
  echo "$name: exit status $status at $((SECONDS - start)) s" | tee -a "$WORK/$step/machine.txt"
  return "$status"
}

case "$step" in
  e2e)
    model=$RUNS/sdar-1.7b-random
    if [ ! -f "$model/config.json" ]; then
      touch_start=$SECONDS
      rm -rf "$model"
      run_dice model model random --config "$root/.device/shared/configs/sdar-1.7b-chat.json" \
        --out "$model" --dtype bf16 --seed 1 --tokenizer "$root/.device/shared/tokenizer"
      echo "random checkpoint written in $((SECONDS - touch_start)) s" | tee -a "$WORK/$step/machine.txt"
    fi
    out=$RUNS/e2e
    resume=(); [ -f "$out/bench.db" ] && resume=(--resume)
    run_dice bench bench --model "$model" --problems kernelbench:L1,L2,L3 \
      --kernelbench "$root/.device/shared/kernelbench.jsonl" --backend cuda \
      --max-new-tokens "${MAX_NEW_TOKENS:-256}" --progress lines --out "$out" "${resume[@]}" "$@" \
      || true
    cp "$out"/report.* "$out"/summary.json "$WORK/$step/" 2>/dev/null || true
    { cat "$WORK/$step/machine.txt"; cat "$out/report.md" 2>/dev/null; } | tee "$OUT/$step.report.txt"
    ;;
  infill)
    bench_out=$RUNS/infill-oracle
    eval_out=$RUNS/infill-eval
    data=$root/.device/shared/infilling_eval_99.jsonl
    limit=()
    if [ -n "${INFILL_LIMIT:-}" ]; then  # the first N records on both sides
      head -n "$INFILL_LIMIT" "$data" >"$RUNS/infill-first-$INFILL_LIMIT.jsonl"
      data=$RUNS/infill-first-$INFILL_LIMIT.jsonl
      limit=(--limit "$INFILL_LIMIT")
    fi
    resume=(); [ -f "$bench_out/bench.db" ] && resume=(--resume)
    bench_ok=0
    run_dice bench bench --mode infill --oracle-middle --infill-data "$data" --device cuda \
      --progress lines --out "$bench_out" "${limit[@]}" "${resume[@]}" "$@" && bench_ok=1
    eval_ok=0
    if [ "$bench_ok" = 1 ] && [ "$(left)" -gt 30 ]; then
      resume=(); [ -f "$eval_out/results.db" ] && resume=(--resume)
      if [ ${#resume[@]} -gt 0 ]; then
        run_dice eval eval --resume --out-dir "$eval_out" --progress lines && eval_ok=1
      else
        run_dice eval eval --candidates "$data" --device cuda --out-dir "$eval_out" \
          --progress lines && eval_ok=1
      fi
    fi
    pkill -f dice_worker 2>/dev/null || true  # workers of a stopped run
    cp "$bench_out"/report.* "$bench_out"/summary.json "$WORK/$step/" 2>/dev/null || true
    cp "$eval_out"/records.jsonl "$eval_out"/summary.md "$WORK/$step/" 2>/dev/null || true
    {
      cat "$WORK/$step/machine.txt"
      if [ "$bench_ok" = 1 ] && [ "$eval_ok" = 1 ]; then
        $DICE_PYTHON "$root/bench/bench_compare.py" "$bench_out/bench.db" "$eval_out/records.jsonl"
      else
        echo "not finished (bench: $bench_ok, eval: $eval_ok): call bench/device_bench.sh infill again"
      fi
    } | tee "$OUT/$step.report.txt"
    ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
esac
