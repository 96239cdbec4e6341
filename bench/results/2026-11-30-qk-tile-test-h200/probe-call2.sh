#!/usr/bin/env bash
# Call 2: every GPU test on the session's last code (the experiments removed).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/device_probe_lib.sh
PROBE=call2
probe_unpack_tests
probe_checks 450 '*' || exit 1
