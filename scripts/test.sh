#!/usr/bin/env bash
# Runs every test of dice: C++ (GoogleTest through ctest), Python (pytest), and the format and lint
# checks. Needs scripts/install.sh and scripts/build.sh first. Exits non-zero if anything fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
py="$root/.venv/bin/python3"
status=0

echo "== format and lint"
mapfile -t cxx_files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if [ ${#cxx_files[@]} -gt 0 ]; then
  clang-format --dry-run -Werror "${cxx_files[@]}" || status=1
fi
"$root/.venv/bin/ruff" check . || status=1
"$root/.venv/bin/ruff" format --check . || status=1

echo "== C++ tests"
ctest --test-dir "$root/build" --output-on-failure -j "$(nproc)" || status=1

echo "== Python tests"
"$py" -m pytest -q || status=1

exit $status
