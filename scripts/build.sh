#!/usr/bin/env bash
# Configures and builds dice (Release with debug info) into build/. Needs scripts/install.sh first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
ninja -C "$root/build"
echo "build.sh: built $root/build/dice"
