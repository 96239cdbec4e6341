#!/usr/bin/env bash
# Stages what a device call needs and git does not carry: the dice binary, the shared data, and
# bubblewrap with the libraries it links (the device image has no bwrap; .device/bwrap runs the
# staged binary through the staged loader, so nothing of this machine's libc leaks into the
# programs it sandboxes).
# Usage (here): bench/device_prepare.sh; then carry ".device" in the device call.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/.device/shared"
strip -o "$root/.device/dice" "$root/build/dice"
cp "$root/../shared/data/kernelbench/problems.jsonl" "$root/.device/shared/kernelbench.jsonl"
cp "$root/../shared/data/dice/infilling_eval_99.jsonl" "$root/.device/shared/infilling_eval_99.jsonl"
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
exclude=$(git -C "$root" rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >>"$exclude"
du -sh "$root/.device"
