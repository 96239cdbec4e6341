# Sourced by the engine's device scripts after common_device.sh (which unpacked the staged
# libraries and put cuBLASLt on the library path): the staged CUDA test binary, dice_cmd /
# tests_cmd, and a check that nothing the binaries load is missing.
TESTS="$root/.device/dice_engine_cuda_tests"
dice_cmd() { "$DICE" "$@"; }
tests_cmd() { "$TESTS" "$@"; }
# Prints what the staged binaries cannot resolve (empty when all is well).
missing_libraries() {
  local b
  for b in "$DICE" "$TESTS"; do
    [ -e "$b" ] || { echo "$b: not staged (bench/device_prepare.sh after a build with nvcc)"; continue; }
    ldd "$b" 2>&1 | grep -i "not found" | sed "s|^|$(basename "$b"): |" || true
  done | sort -u
}
