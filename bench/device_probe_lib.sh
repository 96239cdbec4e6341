# Functions for one-off device probes (bench/results/*/probe-callN.sh, issue 6): a probe script
# sources this from the repository root on the device (after bench/device_prepare.sh here and the
# stripped engine tests binary packed as .device/dice_engine_cuda_tests.xz, carry ".device"),
# then runs checks, kernel timings and tokens/s side by side, each leaving its files under $OUT
# with the call's prefix (PROBE, e.g. PROBE=call3).
#   probe_unpack_tests                      unpacks .device/dice_engine_cuda_tests (PROBE_TESTS:
#                                           another staged tests binary, e.g. a base build's)
#   probe_checks LIMIT FILTER               the GPU tests FILTER (gtest filter) within LIMIT
#                                           seconds: $OUT/$PROBE-check-tests.txt; prints the
#                                           summary; returns 1 when a test failed
#   probe_timings NAME SHAPE...             CudaOps.SkinnyGemmTimings per shape ("4b down"),
#                                           with the DICE_SKINNY_* settings of the environment:
#                                           $OUT/$PROBE-timings-NAME.txt, printed
#   probe_variants NAME VARIANTS            bench/device_engine_variants.sh with VARIANTS and the
#                                           MODELS / SEQUENCES / NEW_TOKENS / REPEATS /
#                                           VARIANTS_LIMIT of the environment:
#                                           $OUT/$PROBE-variants-NAME.{txt,jsonl}; prints the means
# shellcheck shell=bash

probe_tests() { echo "${PROBE_TESTS:-.device/dice_engine_cuda_tests}"; }

probe_unpack_tests() {
  local t
  t=$(probe_tests)
  xz -dc "$t.xz" >"$t" && chmod +x "$t"
}

probe_checks() {
  local limit=$1 filter=$2 file="$OUT/$PROBE-check-tests.txt"
  CHECK_LIMIT=$limit CHECK_TESTS=$filter bash bench/device_engine_check.sh tests >/dev/null 2>&1
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
