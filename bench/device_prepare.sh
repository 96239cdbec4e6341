#!/usr/bin/env bash
# Stages what a device call needs and git does not carry, into the ignored .device/:
# - dice and, when built with CUDA, dice_engine_cuda_tests (built here, stripped; both for sm_90
#   with the CUDA runtime linked statically, so nothing is compiled on the device), each
#   xz-compressed as NAME.xz (~5 MiB instead of ~23 and ~58): bench/common_device.sh unpacks them
#   on the device, so that a base build and its tests fit beside them in the call's 64 MiB;
# - lib.tar.gz: every shared library of theirs a GPU machine may lack (cpp-httplib, brotli,
#   OpenBLAS, PCRE2, utf8proc, gfortran, ...; not glibc's, the C++ runtime's, OpenSSL's or CUDA's),
#   compressed to stay within the call's 64 MiB; bench/common_device.sh unpacks it into .device/lib,
#   where the binaries' RPATH ($ORIGIN/lib) finds it;
# - ninja (KernelBench's load_inline needs it), KernelBench's evaluation code (from the fetched
#   mirror, never committed), the SDAR configs and tokenizer, and the shared data;
# - bubblewrap with the libraries it links (the device image has no bwrap; .device/bwrap runs
#   the staged binary through the staged loader, so nothing of this machine's libc leaks into
#   the programs it sandboxes).
# Usage (here): scripts/build.sh && bench/device_prepare.sh; then carry ".device" in the call.
# KERNELBENCH_MIRROR: a git dir of ScalingIntelligence/KernelBench (default: the fetch tool's).
# STAGE=engine: dice, its libraries and the SDAR configs only (what device_engine_bench.sh,
#   device_engine_variants.sh and device_engine_profile.sh read; ~18 MiB instead of ~33), so that
#   more binaries fit the call's 64 MiB; whatever else an earlier staging left is removed.
#   TESTS=1: the CUDA tests binary too (device_engine_check.sh, bench/device_probe_lib.sh).
# TIMELINE=1: also engine/cuda's CUPTI injection library (libdice_kernel_timeline.so) and the
#   libcupti it links, in .device/timeline/ (bench/device_kernel_timeline.sh).
# BASE=PATH: also stages the dice binary PATH (a build of another commit), stripped and
#   compressed, as .device/dice_base, for device_engine_variants.sh's
#   VARIANTS=';bin=.device/dice_base'. BASE_TESTS=PATH: that build's CUDA tests binary, as
#   .device/dice_engine_cuda_tests_base (PROBE_TESTS of bench/device_probe_lib.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dev="$root/.device"
stage=${STAGE:-all}
case $stage in
  all | engine) ;;
  *) echo "device_prepare.sh: STAGE=$stage: expected all or engine" >&2; exit 2 ;;
esac
for name in dice dice_engine_cuda_tests dice_base dice_engine_cuda_tests_base; do
  rm -f "$dev/$name" "$dev/$name.xz"
done
rm -rf "$dev/lib"
if [ "$stage" = engine ]; then
  rm -rf "$dev/shared" "$dev/kernelbench" "$dev/bin" "$dev/bwrap" "$dev/bwrap-lib"
fi
mkdir -p "$dev/shared/configs"
libs=$(mktemp -d)
trap 'rm -rf "$libs"' EXIT
binaries=()
staged=()
# stage_binary BINARY NAME: BINARY stripped and xz-compressed as .device/NAME.xz.
stage_binary() {
  strip -o "$libs/$2" "$1"
  xz -T0 -6 -c "$libs/$2" >"$dev/$2.xz"
  rm -f "$libs/$2"
  binaries+=("$1")
  staged+=("$2")
}
# stage_given VAR NAME: the executable that the environment variable VAR names, when set, as NAME.
stage_given() {
  local path=${!1:-}
  [ -n "$path" ] || return 0
  [ -x "$path" ] || { echo "device_prepare.sh: $1=$path is not an executable" >&2; exit 2; }
  stage_binary "$path" "$2"
}
stage_binary "$root/build/dice" dice
tests="$root/build/engine/cuda/dice_engine_cuda_tests"
if { [ "$stage" = all ] || [ "${TESTS:-0}" = 1 ]; } && [ -x "$tests" ]; then
  stage_binary "$tests" dice_engine_cuda_tests
fi
stage_given BASE dice_base
stage_given BASE_TESTS dice_engine_cuda_tests_base
mkdir -p "$libs/so"
for lib in $(ldd "${binaries[@]}" | awk '/=> \//{print $3}' | sort -u); do
  case $(basename "$lib") in
    libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|libstdc++*|libgcc_s*|ld-linux*) continue ;;
    libcublas*|libcudart*|libcuda.so*|libcrypto*|libssl*) continue ;;
  esac
  cp -L "$lib" "$libs/so/"
done
tar -C "$libs/so" -czf "$dev/lib.tar.gz" .
rm -rf "$dev/timeline"
if [ "${TIMELINE:-0}" = 1 ]; then
  timeline="$root/build/engine/cuda/libdice_kernel_timeline.so"
  [ -f "$timeline" ] || { echo "device_prepare.sh: TIMELINE=1 but no $timeline (a build with CUPTI)" >&2; exit 2; }
  mkdir -p "$dev/timeline"
  cp "$timeline" "$dev/timeline/"
  cp -L "$(ldd "$timeline" | awk '/libcupti/ {print $3}')" "$dev/timeline/"
  staged+=("timeline/$(basename "$timeline")")
fi
cp "$root"/../shared/models/sdar/configs/*.json "$dev/shared/configs/"
if [ "$stage" = all ]; then
  mkdir -p "$dev/shared/tokenizer" "$dev/bin"
  cp "$(command -v ninja)" "$dev/bin/ninja"
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
  if bw=$(command -v bwrap); then
    rm -rf "$dev/bwrap-lib" && mkdir -p "$dev/bwrap-lib"
    cp "$bw" "$dev/bwrap-lib/bwrap.bin"
    ldd "$bw" | awk '/=>/ {print $3} /ld-linux/ && !/=>/ {print $1}' | while read -r lib; do
      cp -L "$lib" "$dev/bwrap-lib/"
    done
    loader=$(basename "$(ldd "$bw" | awk '/ld-linux/ {print $1}')")
    cat >"$dev/bwrap" <<WRAPPER
#!/bin/sh
# bubblewrap staged by bench/device_prepare.sh, run by its own loader and libraries.
here=\$(dirname "\$(readlink -f "\$0")")/bwrap-lib
exec "\$here/$loader" --library-path "\$here" "\$here/bwrap.bin" "\$@"
WRAPPER
    chmod +x "$dev/bwrap"
    "$dev/bwrap" --ro-bind / / --dev /dev --unshare-net true && echo "staged bubblewrap: $("$dev/bwrap" --version)"
  else
    echo "warning: no bwrap here; device runs will say isolation: none" >&2
  fi
fi
echo "device_prepare.sh: staged (STAGE=$stage) ${staged[*]} and $(tar -tzf "$dev/lib.tar.gz" | grep -c '\.so') libraries"
du -sh "$dev"
