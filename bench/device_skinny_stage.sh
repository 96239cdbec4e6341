#!/usr/bin/env bash
# EXPERIMENT: skinny GEMM weights staged in shared memory before the PDL wait (gemm.cpp's
# DICE_SKINNY_STAGE_*): bit checks with staging on, then tokens/s at 1 sequence, ABAB.
set -uo pipefail
source "$(dirname "$0")/common_device.sh"
source "$(dirname "$0")/engine_device.sh"
begin_test_report skinny-stage${TAG:-}.txt
[ "${TESTS_TOO:-1}" = 1 ] && DICE_SKINNY_STAGE_BYTES=65536 DICE_SKINNY_STAGE_ALL=1 "$TESTS" --gtest_brief=1 \
  --gtest_filter='CudaBackendTest.ProgrammaticLaunchChangesNoBits:CudaBackendTest.LogitsMatchTheCpuReference:CudaBackendTest.FusedNormAndSwigluChangeNoBits'
mkdir -p "$WORK/models"
declare -A oin=([1.7b]=2048 [4b]=4096)
for m in ${MODELS//,/ }; do
  "$DICE" model random --config .device/shared/configs/sdar-$m-chat.json --dtype bf16 \
    --out "$WORK/models/$m" --no-tokenizer --threads 16 --force >/dev/null
  for round in $(seq 1 "${REPEATS:-2}"); do
    for v in ${VARIANTS:-off o98k res64k all64k}; do
      [ "$SECONDS" -lt "${LIMIT:-540}" ] || continue
      case $v in
        off) env=() ;;
        o98k) env=(DICE_SKINNY_STAGE_BYTES=98304 DICE_SKINNY_STAGE_IN=${oin[$m]}) ;;
        o64k) env=(DICE_SKINNY_STAGE_BYTES=65536 DICE_SKINNY_STAGE_IN=${oin[$m]}) ;;
        o32k) env=(DICE_SKINNY_STAGE_BYTES=32768 DICE_SKINNY_STAGE_IN=${oin[$m]}) ;;
        res64k) env=(DICE_SKINNY_STAGE_BYTES=65536) ;;
        all64k) env=(DICE_SKINNY_STAGE_BYTES=65536 DICE_SKINNY_STAGE_ALL=1) ;;
      esac
      env "${env[@]}" "$DICE" engine bench --model "$WORK/models/$m" --sequences 1 \
        --new-tokens 1024 --store fused --no-ceilings --json "$WORK/r.jsonl" >/dev/null 2>&1
      tps=$(tail -1 "$WORK/r.jsonl" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["tokens_per_second"],1))')
      echo "SDAR-$m round $round $v: $tps tok/s"
    done
  done
done
