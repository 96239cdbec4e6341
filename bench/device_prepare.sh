#!/usr/bin/env bash
# Stages what a device call needs and git does not carry: the dice binary and the shared data.
# Usage (here): bench/device_prepare.sh; then carry ".device" in the device call.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/.device/shared"
strip -o "$root/.device/dice" "$root/build/dice"
cp "$root/../shared/data/kernelbench/problems.jsonl" "$root/.device/shared/kernelbench.jsonl"
cp "$root/../shared/data/dice/infilling_eval_99.jsonl" "$root/.device/shared/infilling_eval_99.jsonl"
grep -qxF '/.device/' "$root/.git/info/exclude" 2>/dev/null || echo '/.device/' >>"$root/.git/info/exclude"
du -sh "$root/.device"
