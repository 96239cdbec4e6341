#!/usr/bin/env bash
# Stages what a device call needs and git does not carry: the dice binary and, when built with
# CUDA, the CUDA test binary (both built here, stripped); the shared libraries a GPU machine may
# lack: cpp-httplib and brotli in lib/ (found through the binary's RPATH) and every other one
# theirs (OpenBLAS, PCRE2, utf8proc and their runtime) as lib.tar.gz; ninja (KernelBench's
# load_inline needs it); KernelBench's evaluation code (from the fetched mirror, never
# committed); the SDAR configs and tokenizer; and the shared data.
# Usage (here): scripts/build.sh && bench/device_prepare.sh; then carry ".device" in the call.
# KERNELBENCH_MIRROR: a git dir of ScalingIntelligence/KernelBench (default: the fetch tool's).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dev="$root/.device"
mkdir -p "$dev/shared/configs" "$dev/shared/tokenizer" "$dev/lib" "$dev/bin"
strip -o "$dev/dice" "$root/build/dice"
binaries=("$root/build/dice")
tests="$root/build/engine/cuda/dice_engine_cuda_tests"
if [ -x "$tests" ]; then
  strip -o "$dev/dice_engine_cuda_tests" "$tests"
  binaries+=("$tests")
fi
ldd "$root/build/dice" | awk '/libcpp-httplib|libbrotli/ {print $3}' | while read -r lib; do
  cp -L "$lib" "$dev/lib/"
done
# Libraries: every one the binaries load except glibc's, the C++ runtime's, OpenSSL's and CUDA's
# (the device image has those, the CUDA ones matching its driver).
libs=$(mktemp -d)
trap 'rm -rf "$libs"' EXIT
for lib in $(ldd "${binaries[@]}" | awk '/=> \//{print $3}' | sort -u); do
  case $(basename "$lib") in
    libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|libstdc++*|libgcc_s*|ld-linux*) continue ;;
    libcublas*|libcudart*|libcuda.so*|libcrypto*|libssl*) continue ;;
  esac
  cp -L "$lib" "$libs/"
done
tar -C "$libs" -czf "$dev/lib.tar.gz" .
cp "$(command -v ninja)" "$dev/bin/ninja"
cp "$root"/../shared/models/sdar/configs/*.json "$dev/shared/configs/"
cp "$root"/../shared/models/sdar/tokenizer/* "$dev/shared/tokenizer/"
cp "$root/../shared/data/kernelbench/problems.jsonl" "$dev/shared/kernelbench.jsonl"
cp "$root/../shared/data/dice/infilling_eval_99.jsonl" "$dev/shared/infilling_eval_99.jsonl"
mirror=${KERNELBENCH_MIRROR:-/work/.mirror/ScalingIntelligence+KernelBench/repo}
if [ -d "$mirror" ]; then
  rm -rf "$dev/kernelbench"
  mkdir -p "$dev/kernelbench"
  git --git-dir="$mirror" archive 423217d src/kernelbench | tar -x -C "$dev/kernelbench"
else
  echo "device_prepare.sh: no KernelBench mirror at $mirror (fetch github:ScalingIntelligence/KernelBench); bench/kernelbench_vs_dice.sh kernelbench will not run" >&2
fi
echo "device_prepare.sh: libraries staged: $(tar -tzf "$dev/lib.tar.gz" | grep -c so)"
du -sh "$dev"
