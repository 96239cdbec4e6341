#!/usr/bin/env bash
# Call 5: every GPU test of the session's last engine code (the producer pipelines removed, the
# tensor-map prefetch kept).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_probe_lib.sh
PROBE=call5
probe_unpack_tests
probe_checks 420 '*'
grep -cE "^PASS" "$OUT/$PROBE-check-tests.txt"
grep -E "^FAIL|SKIP" "$OUT/$PROBE-check-tests.txt" | head
