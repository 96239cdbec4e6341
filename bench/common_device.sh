# Sourced by the device scripts: where dice, the worker and the staged data are, a header that
# records the machine, and pack_step, which keeps what comes back from $OUT within its limits
# (8 files: one report and one archive per step).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DICE=${DICE:-$root/.device/dice}
export DICE_WORKER_PATH=$root/evaluator/worker
export DICE_PYTHON=${DICE_PYTHON:-python3}
export DICE_CACHE=${DICE_CACHE:-/tmp/dice-cache}
# bubblewrap staged by device_prepare.sh (the device image has none).
[ -x "$root/.device/bwrap" ] && export DICE_BWRAP=${DICE_BWRAP:-$root/.device/bwrap}
# unpack_staged DIR: the binaries bench/device_prepare.sh staged xz-compressed (DIR/NAME.xz, so
# that several fit a call's 64 MiB), each unpacked beside its .xz as DIR/NAME (executable) unless
# an unpacked copy at least as new is there. An archive that does not unpack is named on stderr
# and leaves no partial file; the rest still unpack.
unpack_staged() {
  local packed bin
  for packed in "$1"/*.xz "$1"/*/*.xz; do
    [ -f "$packed" ] || continue
    bin=${packed%.xz}
    [ -x "$bin" ] && [ ! "$packed" -nt "$bin" ] && continue
    if xz -dc "$packed" >"$bin.part" 2>/dev/null && chmod +x "$bin.part"; then
      mv "$bin.part" "$bin"
    else
      rm -f "$bin.part"
      echo "common_device.sh: $packed does not unpack (xz -d failed); $bin is not staged" >&2
    fi
  done
}
unpack_staged "$root/.device"
OUT=${OUT:-$root/out}
WORK=${WORK:-/tmp/dice-device-work}
mkdir -p "$OUT" "$WORK"
# The libraries bench/device_prepare.sh staged: unpacked beside the binaries, where their RPATH
# ($ORIGIN/lib) looks first.
if [ -f "$root/.device/lib.tar.gz" ]; then
  mkdir -p "$root/.device/lib"
  tar -C "$root/.device/lib" -xzf "$root/.device/lib.tar.gz"
fi
# cuBLASLt, which a dice built with CUDA loads: PyTorch's copy (so that torch, which may also load
# it through this path, gets the very same library), else the CUDA toolkit's. Prints its folder.
find_cublas() {
  local d
  for d in $($DICE_PYTHON -c 'import glob, os, site
for sp in site.getsitepackages():
    for p in sorted(glob.glob(os.path.join(sp, "nvidia", "**", "libcublasLt.so.13*"), recursive=True)):
        print(os.path.dirname(p))' 2>/dev/null) /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -e "$d/libcublasLt.so.13" ] && { echo "$d"; return; }
  done
  d=$(find / -xdev -name 'libcublasLt.so.13' 2>/dev/null | head -1)
  if [ -n "$d" ]; then dirname "$d"; fi
}
if [ -x "$DICE" ] && [[ $(ldd "$DICE" 2>&1 || true) == *"libcublasLt.so.13 => not found"* ]]; then
  cublas_dir=$(find_cublas)
  if [ -n "$cublas_dir" ]; then export LD_LIBRARY_PATH="$cublas_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
fi
machine_header() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
    | sed 's/^/gpu: /' || echo "gpu: none (nvidia-smi failed)"
  echo "cpu cores: $(nproc)"
  $DICE_PYTHON -c 'import torch,sys; print("python", sys.version.split()[0], "torch", torch.__version__)'
  nvcc --version | tail -1 || echo "nvcc: none"
  c++ --version | head -1
  if command -v "${DICE_BWRAP:-bwrap}" >/dev/null; then
    echo "bubblewrap: ${DICE_BWRAP:-bwrap} ($("${DICE_BWRAP:-bwrap}" --version 2>&1 | head -1))"
  else
    echo "bubblewrap: none (not staged: STAGE=engine, or no bwrap where device_prepare.sh ran)"
  fi
}
# pack_step STEP: $WORK/STEP (records, summaries, logs) -> $OUT/STEP.tar.gz
pack_step() {
  tar -C "$WORK" -czf "$OUT/$1.tar.gz" "$1" "$1".* 2>/dev/null || true
}
# A TERM (the device call's time limit, `timeout`) still runs the EXIT traps that pack results.
trap 'exit 143' TERM
