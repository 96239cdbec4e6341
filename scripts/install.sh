#!/usr/bin/env bash
# Installs everything dice needs on a fresh Debian 12 machine: Debian packages with apt, Python
# packages (pinned in requirements.txt) into the virtual environment .venv at the repository root.
# Idempotent: a second run only checks.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
debs=(build-essential cmake ninja-build git python3-venv libssl-dev nlohmann-json3-dev libcli11-dev
      libfmt-dev libgtest-dev libgmock-dev libsqlite3-dev bubblewrap clang-format libcpp-httplib-dev
      pkg-config clang libpcre2-dev libutf8proc-dev libopenblas-dev xz-utils)
missing=()
for d in "${debs[@]}"; do dpkg -s "$d" >/dev/null 2>&1 || missing+=("$d"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
command -v nvcc >/dev/null 2>&1 || echo "install.sh: warning: nvcc (the CUDA toolkit) is not on PATH; candidates cannot be compiled" >&2
py=${DICE_BOOTSTRAP_PYTHON:-python3}
if [ ! -x "$root/.venv/bin/python3" ]; then
  "$py" -m venv "$root/.venv"
fi
stamp="$root/.venv/.requirements.sha256"
want=$(sha256sum "$root/requirements.txt" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$root/.venv/bin/python3" -m pip install -q --no-cache-dir --disable-pip-version-check -r "$root/requirements.txt"
  echo "$want" >"$stamp"
fi
echo "install.sh: ready (python: $root/.venv/bin/python3)"
