# Functions for one-off device probes (bench/results/*/probe-callN.sh, issue 6): a probe script
# sources this from the repository root on the device (after `STAGE=engine TESTS=1
# bench/device_prepare.sh` here, with BASE= and BASE_TESTS= for a base build; carry ".device"),
# then runs checks, kernel timings and tokens/s side by side, each leaving its files under $OUT
# with the call's prefix (PROBE, e.g. PROBE=call3). Sourcing it sources common_device.sh, which
# unpacks the staged .device/*.xz binaries.
#   probe_unpack_tests                      unpack_staged over the folder of the tests binary
#                                           (PROBE_TESTS: another one, packed by hand as
#                                           PATH.xz outside .device/ and its subfolders)
#   probe_checks LIMIT FILTER               the GPU tests FILTER (gtest filter) of probe_tests'
#                                           binary within LIMIT seconds:
#                                           $OUT/$PROBE-check-tests.txt; prints the summary;
#                                           returns 1 when a test failed
#   probe_timings NAME SHAPE...             CudaOps.SkinnyGemmTimings per shape ("4b down"),
#                                           with the DICE_SKINNY_* settings of the environment:
#                                           $OUT/$PROBE-timings-NAME.txt, printed
#   probe_variants NAME VARIANTS            bench/device_engine_variants.sh with VARIANTS and the
#                                           MODELS / SEQUENCES / NEW_TOKENS / REPEATS /
#                                           VARIANTS_LIMIT of the environment:
#                                           $OUT/$PROBE-variants-NAME.{txt,jsonl}; prints the means
#   probe_stalls NAME REGEX COUNT SKIP -- CMD...
#                                           Nsight Compute on CMD: duration, DRAM throughput,
#                                           issue activity and the warp stall ratios (cycles
#                                           per issued instruction) of COUNT launches after SKIP
#                                           of the kernels whose mangled name matches REGEX
#                                           (e.g. attention, or pipelined_kernelILi128ELi1ELb1ELi8E
#                                           for one instantiation): $OUT/$PROBE-stalls-NAME.{txt,
#                                           csv.gz}, the table printed (engine_profile_report.py).
#                                           Give a dice CMD --gpu-memory 16GiB or so: ncu saves
#                                           the kernel's buffers between its replay passes, and
#                                           a KV cache over the whole GPU leaves it no room
#                                           (exit 9, "Failed to profile").
#   probe_env_wrapper NAME 'VAR=V ...'     .device/NAME: a two-line script that runs
#                                           .device/dice with those variables set (for a
#                                           variant 'bin=.device/NAME' of an experiment build
#                                           whose switches come from the environment)
#   probe_source NAME REGEX SKIP -- CMD...  the stall samples by instruction of launch SKIP of
#                                           the kernels matching REGEX (SourceCounters):
#                                           $OUT/$PROBE-source-NAME.{txt,csv.gz}
#                                           (ncu_source_report.py)
# shellcheck shell=bash
# shellcheck source=bench/common_device.sh
source "$(dirname "${BASH_SOURCE[0]}")/common_device.sh"

probe_tests() { echo "${PROBE_TESTS:-.device/dice_engine_cuda_tests}"; }

probe_unpack_tests() { unpack_staged "$(dirname "$(probe_tests)")"; }

probe_env_wrapper() {
  # shellcheck disable=SC2016  # $0 and $@ are the wrapper's own, expanded when it runs
  printf '#!/bin/bash\n%s exec "$(dirname "$0")/dice" "$@"\n' "$2" >".device/$1"
  chmod +x ".device/$1"
}

probe_checks() {
  local limit=$1 filter=$2 file="$OUT/$PROBE-check-tests.txt"
  ENGINE_TESTS=$(realpath "$(probe_tests)") CHECK_LIMIT=$limit CHECK_TESTS=$filter \
    bash bench/device_engine_check.sh tests >/dev/null 2>&1
  cp "$OUT/engine-check.txt" "$file" 2>/dev/null || echo "no engine-check.txt" >"$file"
  grep -E "PASS|FAIL" "$file" | tail -8
  ! grep -q "FAIL" "$file"
}

probe_timings() {
  local name=$1 shape
  shift
  for shape in "$@"; do
    DICE_SKINNY_TIMINGS=1 DICE_SKINNY_SHAPE="$shape" timeout 120 "$(probe_tests)" \
      --gtest_filter=CudaOps.SkinnyGemmTimings 2>&1 | grep -E "cublaslt|wgmma|stream|skinny|copy"
  done | tee "$OUT/$PROBE-timings-$name.txt"
}

probe_variants() {
  local name=$1 start=$SECONDS
  VARIANTS=$2 bash bench/device_engine_variants.sh >/dev/null 2>&1
  cp "$OUT/engine-variants.txt" "$OUT/$PROBE-variants-$name.txt"
  cp "$OUT/engine-variants.jsonl" "$OUT/$PROBE-variants-$name.jsonl"
  grep -A10 "mean tokens" "$OUT/$PROBE-variants-$name.txt"
  echo "variants $name took $((SECONDS - start)) s"
}

probe_ncu() {
  local n
  command -v ncu && return
  for n in /opt/nvidia/nsight-compute/*/ncu; do [ -x "$n" ] && echo "$n" && return; done
}

# The warp stall reasons probe_stalls asks for (smsp__average_warps_issue_stalled_R_per_issue_active).
PROBE_STALL_REASONS="barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle
  not_selected selected branch_resolving dispatch_stall no_instruction imc_miss lg_throttle membar"

probe_stalls() {
  local name=$1 regex=$2 count=$3 skip=$4 r metrics flags=() f="$OUT/$PROBE-stalls-$1.csv"
  shift 4
  [ "${1:-}" = "--" ] && shift
  metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
  metrics+=,smsp__issue_active.avg.per_cycle_active,smsp__inst_executed.sum
  for r in $PROBE_STALL_REASONS; do
    metrics+=",smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
  done
  for r in ${metrics//,/ }; do [ "$r" = gpu__time_duration.sum ] || flags+=(--metric "$r"); done
  timeout "${PROBE_NCU_LIMIT:-200}" "$(probe_ncu)" --clock-control none --cache-control none \
    --metrics "$metrics" --csv --kernel-name-base mangled --kernel-name "regex:$regex" \
    --launch-skip "$skip" --launch-count "$count" "$@" >"$f" 2>"$f.err"
  echo "ncu stalls $name: exit $?"
  grep -m3 ERROR "$f.err"
  python3 bench/engine_profile_report.py "$f" --keep-templates "${flags[@]}" |
    tee "$OUT/$PROBE-stalls-$name.txt"
  gzip -f "$f"
}

probe_source() {
  local name=$1 regex=$2 skip=$3 rep="$OUT/$PROBE-source-$1" ncu
  shift 3
  [ "${1:-}" = "--" ] && shift
  ncu=$(probe_ncu)
  timeout "${PROBE_NCU_LIMIT:-200}" "$ncu" --clock-control none --cache-control none \
    --section WarpStateStats --section SourceCounters --kernel-name-base mangled \
    --kernel-name "regex:$regex" --launch-skip "$skip" --launch-count 1 -o "$rep" "$@" \
    >"$rep.log" 2>&1
  echo "ncu source $name: exit $?"
  "$ncu" -i "$rep.ncu-rep" --page source --csv --print-source sass >"$rep.csv" 2>>"$rep.log"
  python3 bench/ncu_source_report.py "$rep.csv" --top 30 | tee "$rep.txt"
  rm -f "$rep.ncu-rep"
  gzip -f "$rep.csv"
}
