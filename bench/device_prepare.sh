#!/usr/bin/env bash
# Stages what a device call needs and git does not carry: the dice binary with the shared
# libraries a GPU machine may lack (lib/, found through the binary's RPATH), ninja (KernelBench's
# load_inline needs it), KernelBench's evaluation code (from the fetched mirror, never committed),
# the shared data, and bubblewrap with the libraries it links (the device image has no bwrap;
# .device/bwrap runs the staged binary through the staged loader, so nothing of this machine's
# libc leaks into the programs it sandboxes).
# Usage (here): bench/device_prepare.sh; then carry ".device" in the call.
# KERNELBENCH_MIRROR: a git dir of ScalingIntelligence/KernelBench (default: the fetch tool's).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/.device/shared" "$root/.device/lib" "$root/.device/bin"
strip -o "$root/.device/dice" "$root/build/dice"
# Not in a plain Ubuntu image with CUDA: cpp-httplib (Debian ships it as a shared library) and
# the brotli libraries it links.
ldd "$root/build/dice" | awk '/libcpp-httplib|libbrotli/ {print $3}' | while read -r lib; do
  cp -L "$lib" "$root/.device/lib/"
done
cp "$(command -v ninja)" "$root/.device/bin/ninja"
cp "$root/../shared/data/kernelbench/problems.jsonl" "$root/.device/shared/kernelbench.jsonl"
cp "$root/../shared/data/dice/infilling_eval_99.jsonl" "$root/.device/shared/infilling_eval_99.jsonl"
mirror=${KERNELBENCH_MIRROR:-/work/.mirror/ScalingIntelligence+KernelBench/repo}
if [ -d "$mirror" ]; then
  rm -rf "$root/.device/kernelbench"
  mkdir -p "$root/.device/kernelbench"
  git --git-dir="$mirror" archive 423217d src/kernelbench | tar -x -C "$root/.device/kernelbench"
else
  echo "device_prepare.sh: no KernelBench mirror at $mirror (fetch github:ScalingIntelligence/KernelBench); bench/kernelbench_vs_dice.sh kernelbench will not run" >&2
fi
if bw=$(command -v bwrap); then
  rm -rf "$root/.device/bwrap-lib" && mkdir -p "$root/.device/bwrap-lib"
  cp "$bw" "$root/.device/bwrap-lib/bwrap.bin"
  ldd "$bw" | awk '/=>/ {print $3} /ld-linux/ && !/=>/ {print $1}' | while read -r lib; do
    cp -L "$lib" "$root/.device/bwrap-lib/"
  done
  loader=$(basename "$(ldd "$bw" | awk '/ld-linux/ {print $1}')")
  cat >"$root/.device/bwrap" <<WRAPPER
#!/bin/sh
# bubblewrap staged by bench/device_prepare.sh, run by its own loader and libraries.
here=\$(dirname "\$(readlink -f "\$0")")/bwrap-lib
exec "\$here/$loader" --library-path "\$here" "\$here/bwrap.bin" "\$@"
WRAPPER
  chmod +x "$root/.device/bwrap"
  "$root/.device/bwrap" --ro-bind / / --dev /dev --unshare-net true && echo "staged bubblewrap: $("$root/.device/bwrap" --version)"
else
  echo "warning: no bwrap here; device runs will say isolation: none" >&2
fi
du -sh "$root/.device"
