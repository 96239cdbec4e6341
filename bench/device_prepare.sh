#!/usr/bin/env bash
# Stages what a device call needs and git does not carry: the dice binary and, when built with
# CUDA, the CUDA test binary (both built here, stripped), the shared libraries of theirs the device
# image lacks (OpenBLAS, PCRE2, utf8proc and their runtime, as lib.tar.gz), the SDAR configs and
# tokenizer, and the shared data. Usage (here): scripts/build.sh && bench/device_prepare.sh; then
# carry ".device" in the device call.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dev="$root/.device"
mkdir -p "$dev/shared/configs" "$dev/shared/tokenizer"
strip -o "$dev/dice" "$root/build/dice"
binaries=("$root/build/dice")
tests="$root/build/engine/cuda/dice_engine_cuda_tests"
if [ -x "$tests" ]; then
  strip -o "$dev/dice_engine_cuda_tests" "$tests"
  binaries+=("$tests")
fi
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
cp "$root"/../shared/models/sdar/configs/*.json "$dev/shared/configs/"
cp "$root"/../shared/models/sdar/tokenizer/* "$dev/shared/tokenizer/"
cp "$root/../shared/data/kernelbench/problems.jsonl" "$dev/shared/kernelbench.jsonl"
cp "$root/../shared/data/dice/infilling_eval_99.jsonl" "$dev/shared/infilling_eval_99.jsonl"
echo "device_prepare.sh: libraries staged: $(tar -tzf "$dev/lib.tar.gz" | grep -c so)"
du -sh "$dev"
