#!/usr/bin/env bash
# Call 9: every GPU test on the code this session ends with (128 k a stage the default).
set -uo pipefail
cd "$(dirname "$0")/.."
xz -dc .device/dice_engine_cuda_tests.xz > .device/dice_engine_cuda_tests && chmod +x .device/dice_engine_cuda_tests
start=$SECONDS
CHECK_LIMIT=300 bash bench/device_engine_check.sh tests > /dev/null 2>&1
cp "$OUT/engine-check.txt" "$OUT/call9-check-tests.txt"
grep -c '^PASS' "$OUT/call9-check-tests.txt"; grep -E '^(FAIL|SKIP)' "$OUT/call9-check-tests.txt" | cut -c1-300 | head -20
echo "tests took $((SECONDS - start)) s"
