# Sourced by the engine's device scripts after common_device.sh (which unpacked the staged
# libraries and put cuBLASLt on the library path): the staged CUDA test binary, dice_cmd /
# tests_cmd, and a check that nothing the binaries load is missing. ENGINE_TESTS (an absolute
# path) names another tests binary, e.g. a base build's that a probe checks
# (device_probe_lib.sh's probe_checks with PROBE_TESTS).
TESTS="${ENGINE_TESTS:-$root/.device/dice_engine_cuda_tests}"
dice_cmd() { "$DICE" "$@"; }
tests_cmd() { "$TESTS" "$@"; }
# Prints what the staged binaries cannot resolve (empty when all is well): the binaries given,
# else dice and the CUDA test binary.
missing_libraries() {
  local b binaries=("$@")
  [ $# -gt 0 ] || binaries=("$DICE" "$TESTS")
  for b in "${binaries[@]}"; do
    [ -e "$b" ] || { echo "$b: not staged (bench/device_prepare.sh after a build with nvcc)"; continue; }
    ldd "$b" 2>&1 | grep -i "not found" | sed "s|^|$(basename "$b"): |" || true
  done | sort -u
}
# For the scripts that only run tests_cmd: everything from here on also goes to $OUT/$1, which
# starts with the machine header; exits 1, saying what is wrong, unless the staged binaries load.
begin_test_report() {
  exec > >(tee "$OUT/$1") 2>&1
  machine_header
  local missing
  missing=$(missing_libraries)
  [ -z "$missing" ] || { echo "the staged binaries cannot run: $missing"; exit 1; }
}
# The option that keeps `BINARY engine bench` to its burst ceilings (`--sustained-gemm-seconds 0`),
# for runs that compare tokens/s and need no floor at the sustained GEMM rate: the 4 s of
# back-to-back GEMMs would take device time and leave the card warmer than a build from before
# the option leaves it, just before the timed run. Prints nothing for such an older build.
burst_ceilings_only() {
  "$1" engine bench --help 2>/dev/null | grep -q -- "--sustained-gemm-seconds" &&
    echo "--sustained-gemm-seconds 0"
}
# The config of SDAR-SHAPE for `dice model random`: the staged config file of 1.7b, 4b or 8b
# (printed whether or not it exists), or `tiny` (dice's test shape, for a dry run on a CPU).
sdar_config() {
  if [ "$1" = tiny ]; then echo tiny; else echo "$root/.device/shared/configs/sdar-$1-chat.json"; fi
}
# Writes a checkpoint of SDAR-SHAPE's shape (sdar_config) with random bf16 weights and no
# tokenizer to DIR; further `dice model random` options may follow (e.g. --layers 2). Gives up
# after RANDOM_MODEL_TIMEOUT seconds (default 1,800; at least 5, since `timeout 0` would wait
# forever). Returns dice's exit status; its output goes to /dev/null.
random_sdar_model() {
  local shape=$1 dir=$2 seconds=${RANDOM_MODEL_TIMEOUT:-1800}
  shift 2
  [ "$seconds" -ge 5 ] 2>/dev/null || seconds=5
  timeout "$seconds" "$DICE" model random --config "$(sdar_config "$shape")" --dtype bf16 \
    --out "$dir" --no-tokenizer --threads "$(nproc)" --force "$@" >/dev/null
}
