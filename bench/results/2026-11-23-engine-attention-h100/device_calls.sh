#!/usr/bin/env bash
# The device calls of this folder (issue 6, attention at short contexts), run from a staging copy
# of bench/ and .device/ (bench/device_prepare.sh, plus main's dice at ce1ff48 as
# .device/dice-main). Each step writes under $OUT/<step>/; the end packs the logs into
# $OUT/all.tar.gz and leaves the short text reports on top (a call returns 8 files at most).
#   bash device_calls.sh STEP[,STEP...]
# Steps: tests (the GPU and planner tests, one process each), timings (CudaOps.AttentionTimings:
# per-launch attention, first vs pipelined kernel, 1/16/128 sequences, contexts 64..4160),
# bench (tok/s, 1.7B 1/16/128 sequences, main's dice then this branch's), bench4b (the same, 4B,
# 1/16), check (cli,smoke steps of device_engine_check.sh), profile (Nsight Compute per kernel,
# 1 and 16 sequences, main's then this branch's), profile1000 (the same at a 1,000-token prompt,
# 1 sequence).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${STAGE:-$here}
cd "$root"
top=$OUT
step_out() { mkdir -p "$top/$1"; echo "$top/$1"; }
for step in ${1//,/ }; do
  echo "=== $step ($(date -u +%H:%M:%SZ), ${SECONDS}s)"
  case $step in
    tests)
      OUT=$(step_out tests) CHECK_LIMIT=${TESTS_LIMIT:-130} bash bench/device_engine_check.sh tests >/dev/null
      cp "$top/tests/engine-check.txt" "$top/engine-check-tests.txt"
      grep -c '^PASS' "$top/tests/engine-check.txt" | sed 's/^/PASS /'
      grep -E '^(FAIL|SKIP)' "$top/tests/engine-check.txt" ;;
    check)
      OUT=$(step_out check) CHECK_LIMIT=${CHECK_LIMIT:-200} bash bench/device_engine_check.sh cli,smoke >/dev/null
      cp "$top/check/engine-check.txt" "$top/engine-check-cli-smoke.txt"
      grep -E '^(PASS|FAIL|SKIP|INFO)' "$top/check/engine-check.txt" | cut -c1-160 ;;
    timings)
      o=$(step_out timings)
      ( source bench/common_device.sh && source bench/engine_device.sh &&
        DICE_ATTENTION_TIMINGS=1 timeout ${TIMINGS_LIMIT:-80} "$TESTS" \
          --gtest_filter=CudaOps.AttentionTimings ) >"$o/timings.log" 2>&1
      grep -E '^(attention|model|1\.7b|4b)|Failure|FAILED|PASSED' "$o/timings.log" | tee "$top/attention-timings.txt" ;;
    bench|bench4b)
      models=1.7b seqs=1,16,128
      [ "$step" = bench4b ] && models=4b seqs=1,16
      for bin in main new; do
        d=.device/dice; [ $bin = main ] && d=.device/dice-main
        o=$(step_out "$step-$bin")
        DICE=$root/$d OUT=$o MODELS=$models SEQUENCES=$seqs NEW_TOKENS=1024 STORE=fused TORCH=0 \
          BENCH_LIMIT=${BENCH_LIMIT:-50} bash bench/device_engine_bench.sh >/dev/null 2>&1
        cp "$o/engine-bench.txt" "$top/$step-$bin.txt"
        grep -E '^ *(1\.7b|4b) ' "$o/engine-bench.txt" | sed "s/^/$bin /"
      done ;;
    profile|profile1000)
      seqs=1,16 prompt=64
      [ "$step" = profile1000 ] && seqs=1 prompt=1000
      for bin in main new; do
        d=.device/dice; [ $bin = main ] && d=.device/dice-main
        o=$(step_out "$step-$bin")
        DICE=$root/$d OUT=$o KERNELS=new GRAPHS=0 NCU_CACHE=none PROFILE_SEQUENCES=$seqs \
          PROMPT_LENGTH=$prompt NCU_KERNELS=${NCU_KERNELS:-1200} timeout ${PROFILE_LIMIT:-120} \
          bash bench/device_engine_profile.sh >/dev/null 2>&1
        cp "$o/engine-profile.txt" "$top/$step-$bin.txt"
        grep -E '^##|attention|GPU time per forward' "$o/engine-profile.txt" | sed "s/^/$bin /"
      done ;;
  esac
done
# Pack everything below the top into one archive (the reports stay on top).
cd "$top" && dirs=$(find . -mindepth 1 -maxdepth 1 -type d -printf '%f ') && [ -n "$dirs" ] &&
  tar -czf all.tar.gz $dirs && rm -rf $dirs
echo "done in ${SECONDS}s"
