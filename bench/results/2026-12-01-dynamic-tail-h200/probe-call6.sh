#!/usr/bin/env bash
# Call 6: every GPU test of the kept code (the dynamic tail on by default for the lm_head).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
probe_unpack_tests
PROBE=call6
probe_checks 330 '*'
rm -f "$OUT"/engine-check.*
