# Sourced by the engine's device scripts after common_device.sh: unpacks the staged libraries,
# finds cuBLASLt (the CUDA toolkit's or PyTorch's copy), and defines dice_cmd / tests_cmd, which
# run the staged binaries with both on their library path (nothing else sees that path).
lib_dir=${DICE_LIB_DIR:-/tmp/dice-device-lib}
mkdir -p "$lib_dir"
tar -C "$lib_dir" -xzf "$root/.device/lib.tar.gz"
find_cublas() {
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           $(python3 -c 'import glob, os, site
for sp in site.getsitepackages():
    for p in glob.glob(os.path.join(sp, "nvidia", "**", "libcublasLt.so.13*"), recursive=True):
        print(os.path.dirname(p))' 2>/dev/null); do
    [ -e "$d/libcublasLt.so.13" ] && { echo "$d"; return; }
  done
  d=$(find / -xdev -name 'libcublasLt.so.13' 2>/dev/null | head -1)
  [ -n "$d" ] && dirname "$d"
}
cublas_dir=$(find_cublas)
export DICE_LD_PATH="$lib_dir${cublas_dir:+:$cublas_dir}"
TESTS="$root/.device/dice_engine_cuda_tests"
dice_cmd() { LD_LIBRARY_PATH="$DICE_LD_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$DICE" "$@"; }
tests_cmd() { LD_LIBRARY_PATH="$DICE_LD_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$TESTS" "$@"; }
# Prints what the staged binaries cannot resolve (empty when all is well).
missing_libraries() {
  LD_LIBRARY_PATH="$DICE_LD_PATH" ldd "$DICE" "$TESTS" 2>&1 | grep -i "not found" | sort -u
}
